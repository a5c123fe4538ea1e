"""End to end over HTTP with real signatures: the bot, the Slack sandbox, SQLite."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from slack_bolt.request import internals
from sqlalchemy import func, select

from bot.errors import REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_models import AuditEvent
from store.models import Decision, Run
from tests.bot.flows import DELETE, SEND, button, card_now, ephemeral_for, result_message, start_run


def _count(h, model) -> int:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return s.scalar(select(func.count()).select_from(model))


def test_approve_runs_tool_once_updates_card_and_posts_result(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    assert "send_external_message" in card.text
    assert [b.text for b in buttons(card)] == ["Approve", "Edit", "Reject", "Cancel run"]

    reply = h.driver.click(
        user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve")
    )
    assert reply.status == 200
    result = result_message(h, root)

    assert "message sent to partner@example.com" in result.text
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
    updated = card_now(h, card)
    assert buttons(updated) == []
    rendered = json.dumps(updated.blocks)
    assert f"<@{people.RELEASE_MANAGER}> approved" in rendered
    assert "Approved" in rendered


def test_requester_cannot_approve_own_action(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)

    h.driver.click(user=people.REQUESTER, message=card, button=button(card, "Approve"))

    assert ephemeral_for(h, people.REQUESTER) == REFUSALS["self_approval"]
    assert h.workspace.effects() == []
    assert _count(h, Decision) == 0
    with h.bot.db.transaction() as s:
        refused = s.scalars(select(AuditEvent).where(AuditEvent.outcome == "refused")).all()
        assert [(e.kind, e.actor_id, e.reason) for e in refused] == [
            ("decision_refused", people.REQUESTER, "self_approval")
        ]
        run = s.scalars(select(Run)).one()
        assert run.status == "waiting"
    assert h.bot.runtime.state(run.id).interrupts, "the run must still be paused"
    assert buttons(card_now(h, card)), "the card keeps its buttons"


def test_non_approver_is_refused(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    h.driver.click(user=people.OUTSIDER, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.OUTSIDER) == REFUSALS["not_an_approver"]
    assert _count(h, Decision) == 0


def test_usergroup_member_may_approve(serve_bot, sqlite_url):
    """U0REL2 is listed in the policy; the sandbox group S0RELMGR also holds U0REL1 and U0REL2."""
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER_2, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_reject_asks_reason_in_modal_and_agent_sees_it(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, DELETE)
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Reject"))
    modal = h.state.wait_for(lambda: h.state.open_views(people.SECURITY))[-1]
    assert modal.view["private_metadata"] == button(card, "Reject").value

    empty = h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"reject_reason": {"reason": "  "}}
    )
    assert empty.status == 200 and empty.json()["response_action"] == "errors"
    assert _count(h, Decision) == 0

    h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"reject_reason": {"reason": "Keep it"}}
    )
    result = result_message(h, root)
    assert "rejected" in result.text and "Keep it" in result.text
    assert h.workspace.effects() == []
    assert (h.workspace.root / "notes/old.txt").exists()
    assert "Keep it" in json.dumps(card_now(h, card).blocks)


def test_batch_of_two_approve_one_reject_other(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, f"{SEND}\n{DELETE}")
    approve_first, reject_second = button(card, "Approve", 0), button(card, "Reject", 1)
    assert button(card, "Approve all I may approve").value.startswith("apr_")
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve_first)
    h.state.wait_for(
        lambda: [b.text for b in buttons(card_now(h, card))] == ["Approve", "Reject", "Cancel run"]
    )
    assert h.workspace.effects() == [], "nothing runs before every action is decided"
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=reject_second)
    modal = h.state.wait_for(lambda: h.state.open_views(people.RELEASE_MANAGER))[-1]
    h.driver.submit_view(
        user=people.RELEASE_MANAGER, view_id=modal.id, values={"reject_reason": {"reason": "no"}}
    )
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_forged_signature_and_stale_timestamp_get_401_and_record_nothing(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    body = urlencode(
        {
            "command": "/agent",
            "text": SEND,
            "user_id": people.REQUESTER,
            "channel_id": people.CHANNEL,
            "team_id": "T0SANDBOX",
        }
    )
    forged = h.driver.post(body, signature="v0=" + "0" * 64)
    stale_ts = int(time.time()) - 6 * 60
    stale = h.driver.post(body, timestamp=stale_ts)
    unsigned_ts = h.driver.post(body, signature="")

    assert (forged.status, stale.status) == (401, 401)
    assert unsigned_ts.status == 401
    assert _count(h, Run) == 0 and _count(h, AuditEvent) == 0
    assert h.state.messages == []


def _checkpoints(h) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Checkpoints by thread id: every thread the agent ever ran, and how far."""
    assert h.bot.settle(timeout=60)
    found: dict[str, int] = {}
    for saved in h.bot.runtime.checkpointer.list(None):
        thread = saved.config["configurable"]["thread_id"]
        found[thread] = found.get(thread, 0) + 1
    return found


def test_unknown_and_resolved_approval_ids_are_refused_without_resume(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    approve = button(card, "Approve")
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    result_message(h, root)
    with h.bot.db.transaction() as s:
        runs_before = s.scalars(select(Run.id)).all()
    threads_before = _checkpoints(h)
    assert set(threads_before) == set(runs_before), "the run's thread, keyed by its run id"

    forged = approve.__class__(approve.block_id, approve.action_id, "act_" + "0" * 32, "Approve")
    h.driver.click(user=people.SECURITY, message=card, button=forged)
    assert ephemeral_for(h, people.SECURITY) == REFUSALS["unknown_approval"]
    h.driver.click(user=people.SECURITY, message=card, button=approve)
    assert ephemeral_for(h, people.SECURITY, 2) == REFUSALS["already_decided"]

    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
    with h.bot.db.transaction() as s:
        assert s.scalars(select(Run.id)).all() == runs_before
    assert _checkpoints(h) == threads_before, "no thread started, none resumed again"


def test_empty_slash_command_gets_usage_and_starts_nothing(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    reply = h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text="   ")
    assert reply.status == 200 and "/agent" in reply.body
    assert _count(h, Run) == 0


def test_a_click_body_is_parsed_once_for_the_check_and_bolt(serve_bot, sqlite_url, monkeypatch):
    """The front end refuses signed bodies Bolt would trip over; it does so on Bolt's parse of
    the body, not on one of its own (a card's click carries the whole card, URL-encoded)."""
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    parsed: list[str] = []
    parse_qsl = internals.parse_qsl

    def counted(body, **kwargs):  # type: ignore[no-untyped-def]
        parsed.append(body)
        return parse_qsl(body, **kwargs)

    monkeypatch.setattr(internals, "parse_qsl", counted)
    approve = button(card, "Approve")
    assert h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve).status == 200
    assert len(parsed) == 1
    result_message(h, root)


def test_a_run_whose_thread_cannot_be_posted_is_told_and_ends_at_once(serve_bot, sqlite_url):
    """The bot is not in the channel: the requester is told how to fix it, the run it stored
    ends (failed, audited) instead of staying "running" for good, and nothing is posted for it
    later."""
    h = serve_bot(sqlite_url)
    refused = h.sandbox.misbehave("chat.postMessage", error="not_in_channel")
    reply = h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
    assert reply.status == 200
    told = h.state.wait_for(lambda: list(h.state.responses))
    assert refused.reached.is_set()
    assert "Invite me to it first" in told[0]["text"]
    assert h.bot.services.executor.wait_idle(60)
    with h.bot.db.transaction() as s:
        (run,) = s.scalars(select(Run)).all()
        assert (run.status, run.thread_ts, run.result_posted) == ("failed", None, True)
        kinds = list(s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run.id)))
    assert kinds == ["run_started", "run_failed"]
    assert h.state.top_level(people.CHANNEL) == [] and h.workspace.effects() == []
