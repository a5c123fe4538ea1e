"""No approval fatigue: Deep Agents' read-only built-ins run without a card, each call audited;
a write in the same request still waits for a reviewer. Over signed HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from sqlalchemy import select

from agent_runtime.agents.unreviewed import UNREVIEWED_EVENT
from agent_runtime.policy import BUNDLED_POLICY, REDACTED
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_models import AuditEvent
from store.models import Run
from tests.bot.flows import result_message, start_run

LS = 'ls {"path": "/"}'
WRITE = 'write_file {"file_path": "/notes.md", "content": "hello"}'


def test_a_read_only_call_runs_without_a_card_and_is_audited(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    before = {m.ts for m in h.state.top_level(people.CHANNEL)}
    reply = h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=LS)
    assert reply.status == 200
    root = h.state.wait_for(
        lambda: next((m for m in h.state.top_level(people.CHANNEL) if m.ts not in before), None)
    )
    result_message(h, root)
    assert not any(buttons(m) for m in h.state.thread(people.CHANNEL, root.ts))  # no card
    with h.bot.db.transaction() as s:
        run_id = s.scalars(select(Run.id)).one()
        (event,) = s.scalars(select(AuditEvent).where(AuditEvent.kind == UNREVIEWED_EVENT))
        assert (event.run_id, event.detail["tool"], event.detail["args"]) == (
            run_id,
            "ls",
            {"path": "/"},
        )
        assert event.detail["status"] == "success"


def test_a_write_beside_a_read_still_waits_for_a_reviewer(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, f"{LS}\n{WRITE}")
    shown = json.dumps(card.blocks)
    assert "write_file" in shown and '"ls"' not in shown and "`ls`" not in shown


def test_an_unreviewed_call_keeps_what_the_policy_redacts_out_of_its_audit_event(
    serve_bot, sqlite_url, tmp_path: Path
):
    """A tool may run without a card and still take a secret: its ``redact`` holds for the
    event that records the call."""
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["tools"]["ls"]["redact"] = ["path"]
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    h = serve_bot(sqlite_url, policy_file=path)
    before = {m.ts for m in h.state.top_level(people.CHANNEL)}
    reply = h.driver.slash_command(
        user=people.REQUESTER, channel=people.CHANNEL, text='ls {"path": "/private-s3cret"}'
    )
    assert reply.status == 200
    root = h.state.wait_for(
        lambda: next((m for m in h.state.top_level(people.CHANNEL) if m.ts not in before), None)
    )
    result_message(h, root)
    with h.bot.db.transaction() as s:
        (event,) = s.scalars(select(AuditEvent).where(AuditEvent.kind == UNREVIEWED_EVENT))
        assert (event.detail["tool"], event.detail["args"]) == ("ls", {"path": REDACTED})
