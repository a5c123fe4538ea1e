"""A run's result that its thread will never take (the channel archived, the bot removed from
it): the requester is told directly, the audit log says where the result went and why, and it
is not tried again at every maintenance round. A refusal that may pass is tried again."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import select

from bot.sandbox import people
from bot.sandbox.state import Message
from store.audit_models import AuditEvent
from store.models import Run
from tests.agent_runtime.engine_env import Clock
from tests.bot.flows import SEND, button, result_message, start_run
from tests.conftest import Harness

WAIT = 60.0


def _result_post(root: Message) -> Any:
    def matches(args: dict[str, Any]) -> bool:
        return args.get("thread_ts") == root.ts and str(args.get("text", "")).startswith("Run ")

    return matches


def _approve(h: Harness, card: Message) -> None:
    reply = h.driver.click(
        user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve")
    )
    assert reply.status == 200


def _a_day_of_maintenance(h: Harness, clock: Clock) -> None:
    """Past every lease and grace: a result still owed is posted by this round."""
    assert h.bot.settle(timeout=WAIT)
    clock.now += dt.timedelta(days=1)
    h.bot.engine.reconcile()
    assert h.bot.settle(timeout=WAIT)


def _results_in_thread(h: Harness, root: Message) -> list[Message]:
    return [m for m in h.state.thread(people.CHANNEL, root.ts) if m.text.startswith("Run ")]


def _run(h: Harness) -> Run:
    with h.bot.db.transaction() as s:
        return s.scalars(select(Run)).one()


def _events(h: Harness, kind: str) -> list[AuditEvent]:
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == kind)))


@pytest.mark.parametrize(
    "refusal",
    ["is_archived", "not_in_channel", "channel_not_found", "restricted_action_read_only_channel"],
)
def test_a_result_the_thread_refuses_for_good_reaches_the_requester_once(
    serve_bot, sqlite_url, refusal
):
    clock = Clock()
    h = serve_bot(sqlite_url, clock=clock)
    root, card = start_run(h, SEND)
    refused = h.sandbox.misbehave("chat.postMessage", match=_result_post(root), error=refusal)
    _approve(h, card)
    assert refused.reached.wait(WAIT)

    told = h.state.wait_for(lambda: h.state.dm_with(people.REQUESTER) or None, timeout=WAIT)
    assert len(told) == 1
    assert told[0].text.startswith("Run finished")
    shown = str(told[0].blocks)
    assert "message sent to partner@example.com" in shown, "the result itself"
    assert f"<#{people.CHANNEL}>" in shown, "where it could not go"

    _a_day_of_maintenance(h, clock)
    assert _results_in_thread(h, root) == [], "tried again though the channel refused for good"
    assert len(h.state.dm_with(people.REQUESTER)) == 1, "told twice"
    run = _run(h)
    assert (run.status, run.result_posted) == ("completed", True)
    [event] = _events(h, "result_undeliverable")
    assert (event.run_id, event.team_id, event.outcome) == (run.id, run.team_id, "error")
    assert (event.reason, event.detail) == (refusal, {"told_requester": True})


def test_a_result_refused_for_now_is_posted_in_its_thread_later(serve_bot, sqlite_url):
    clock = Clock()
    h = serve_bot(sqlite_url, clock=clock)
    root, card = start_run(h, SEND)
    refused = h.sandbox.misbehave("chat.postMessage", match=_result_post(root), error="fatal_error")
    _approve(h, card)
    assert refused.reached.wait(WAIT)

    _a_day_of_maintenance(h, clock)
    assert "message sent to partner@example.com" in result_message(h, root).text
    assert h.state.dm_with(people.REQUESTER) == []
    assert _events(h, "result_undeliverable") == []


def test_a_requester_who_cannot_be_told_either_leaves_it_in_the_audit_log(serve_bot, sqlite_url):
    clock = Clock()
    h = serve_bot(sqlite_url, clock=clock)
    root, card = start_run(h, SEND)
    h.sandbox.misbehave("chat.postMessage", match=_result_post(root), error="not_in_channel")
    dm = h.sandbox.misbehave("conversations.open", match=_requester, error="user_disabled")
    _approve(h, card)
    assert dm.reached.wait(WAIT)

    _a_day_of_maintenance(h, clock)
    assert _results_in_thread(h, root) == [] and h.state.dm_with(people.REQUESTER) == []
    assert _run(h).result_posted
    [event] = _events(h, "result_undeliverable")
    assert event.reason == "not_in_channel"
    assert event.detail == {"told_requester": False, "direct_refusal": "user_disabled"}


def test_a_direct_message_that_failed_for_now_is_sent_at_the_next_round(serve_bot, sqlite_url):
    """The thread refuses for good, the direct message fails in a way that may pass: nothing
    is settled, and the next round, refused by the thread again, tells the requester."""
    clock = Clock()
    h = serve_bot(sqlite_url, clock=clock)
    root, card = start_run(h, SEND)
    for _refusal in range(2):
        h.sandbox.misbehave("chat.postMessage", match=_result_post(root), error="is_archived")
    dm = h.sandbox.misbehave("conversations.open", match=_requester, error="fatal_error")
    _approve(h, card)
    assert dm.reached.wait(WAIT)
    assert h.bot.settle(timeout=WAIT)
    assert not _run(h).result_posted
    assert h.state.dm_with(people.REQUESTER) == [] and _events(h, "result_undeliverable") == []

    _a_day_of_maintenance(h, clock)
    told = h.state.dm_with(people.REQUESTER)
    assert len(told) == 1 and "message sent to partner@example.com" in str(told[0].blocks)
    assert _results_in_thread(h, root) == []
    [event] = _events(h, "result_undeliverable")
    assert (event.reason, event.detail) == ("is_archived", {"told_requester": True})
    _a_day_of_maintenance(h, clock)
    assert len(h.state.dm_with(people.REQUESTER)) == 1, "told twice"


def _requester(args: dict[str, Any]) -> bool:
    return args.get("users") == people.REQUESTER
