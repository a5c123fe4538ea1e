"""A gated tool does not run without a matching approval, however the agent is wired.

Each test drives the real bot over signed HTTP against the local Slack sandbox.
"""

from __future__ import annotations

import json

from sqlalchemy import select

from agent_runtime.gate import BLOCKED_EVENT
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_models import AuditEvent
from store.models import Decision
from tests.bot.flows import button, card_now, result_message, start_run

SUBAGENT_TASK = "task " + json.dumps(
    {
        "description": (
            'delete_project_file {"path": "notes/old.txt"}\n'
            'send_external_message {"recipient": "partner@example.com", "text": "leak"}'
        ),
        "subagent_type": "general-purpose",
    }
)
PER_CALL = "agent_runtime.agents.change_request:build_per_call_agent"
OLD_WIRING = "tests.agent_runtime.custom_graphs:old_per_call_wiring"
NO_REVIEW = "tests.agent_runtime.custom_graphs:no_review_agent"


def audit(h, kind: str) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == kind)))


def decisions(h) -> list[Decision]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(Decision)))


def card_for(h, root, tool: str):  # type: ignore[no-untyped-def]
    """The open card in the run's thread that asks about ``tool``."""
    return next(
        (m for m in h.state.thread(people.CHANNEL, root.ts) if buttons(m) and tool in m.text),
        None,
    )


def row_button(card, row: str, label: str = "Approve"):  # type: ignore[no-untyped-def]
    """The button of one action's row (block ids name the action), never picked by position."""
    return next(b for b in buttons(card) if b.block_id == row and b.text == label)


def start_unreviewed(h, text: str):  # type: ignore[no-untyped-def]
    """A run expected to finish without any card: its root message and its result."""
    h.driver.slash_command(user=people.OUTSIDER, channel=people.CHANNEL, text=text)
    root = h.state.wait_for(lambda: next(iter(h.state.top_level(people.CHANNEL)), None))
    return root, result_message(h, root)


def test_the_general_purpose_subagent_of_the_per_call_agent_gets_cards(serve_bot, sqlite_url):
    """The bundled per-call agent reviews its general-purpose subagent's calls like its own."""
    h = serve_bot(sqlite_url, agent=PER_CALL)
    root, card = start_run(h, SUBAGENT_TASK, user=people.OUTSIDER)
    assert "delete_project_file" in json.dumps(card.blocks)
    assert h.workspace.effects() == [], "nothing runs before a reviewer approves"
    assert (h.workspace.root / "notes/old.txt").exists()

    for tool in ("delete_project_file", "send_external_message"):
        found = h.state.wait_for(lambda t=tool: card_for(h, root, t))
        h.driver.click(user=people.SECURITY, message=found, button=button(found, "Approve"))
    result_message(h, root)
    assert sorted(e["tool"] for e in h.workspace.effects()) == [
        "delete_project_file",
        "send_external_message",
    ]
    assert audit(h, BLOCKED_EVENT) == []


def test_an_ungated_subagent_is_stopped_by_the_tools_themselves(serve_bot, sqlite_url):
    """The wiring that let the general-purpose subagent run gated tools with no card: the tools
    refuse, the thread is told, the audit log says so, and nothing changes."""
    h = serve_bot(sqlite_url, agent=OLD_WIRING)
    root, result = start_unreviewed(h, SUBAGENT_TASK)

    assert h.workspace.effects() == []
    assert (h.workspace.root / "notes/old.txt").exists()
    blocked = audit(h, BLOCKED_EVENT)
    assert sorted(e.detail["tool"] for e in blocked) == [
        "delete_project_file",
        "send_external_message",
    ]
    assert {e.reason for e in blocked} == {"no reviewer approved this call"}
    notices = [m.text for m in h.state.thread(people.CHANNEL, root.ts) if "Blocked" in m.text]
    assert len(notices) == 2 and any("delete_project_file" in n for n in notices)
    assert decisions(h) == [], "no decision was made or faked"
    assert "failed" in result.text or "Refused" in result.text


def test_an_agent_with_no_review_at_all_cannot_act(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, agent=NO_REVIEW)
    _root, result = start_unreviewed(
        h,
        'read_public_report {"path": "reports/weekly.md"}\n'
        'send_external_message {"recipient": "partner@example.com", "text": "hi"}',
    )
    assert h.workspace.effects() == []
    assert [e.detail["tool"] for e in audit(h, BLOCKED_EVENT)] == ["send_external_message"]
    assert "read_public_report done" in result.text, "ungated tools still work"


def test_an_approval_is_spent_by_one_call_and_identical_calls_each_need_their_own(
    serve_bot, sqlite_url
):
    """Two identical calls in one batch are two actions with two idempotency keys: both run
    once approved, each recorded once."""
    h = serve_bot(sqlite_url)
    send = 'send_external_message {"recipient": "partner@example.com", "text": "twice"}'
    root, card = start_run(h, f"{send}\n{send}")
    rows = [b.block_id for b in buttons(card) if b.text == "Approve"]
    assert len(rows) == 2
    for row in rows:
        h.driver.click(user=people.SECURITY, message=card, button=row_button(card, row))
        h.state.wait_for(
            lambda r=row: not [b for b in buttons(card_now(h, card)) if b.block_id == r]
        )
    result_message(h, root)
    assert [e["text"] for e in h.workspace.effects()] == ["twice", "twice"]
    outcomes = audit(h, "tool_outcome")
    assert len(outcomes) == 2 and all(o.detail["status"] == "success" for o in outcomes)
    assert len({o.detail["operation_id"] for o in outcomes}) == 2
