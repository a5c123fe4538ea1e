"""Decision clicks and submissions are stored before the ack, so busy workers drop none of
them: they are decided later, and nobody is told to retry. Only when a click cannot be stored
(or a slash command finds the pool full) is it dropped, never silently: clicks get an
ephemeral, submissions an error on the form (which stays open), commands a reply; each drop is
audited, and a retry works. Slow notices never hold up Slack's acks, and an error in the
decision work reaches the user."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from sqlalchemy import select

from bot import inbox_runner
from bot.errors import AUDIT_UNWRITABLE, BUSY, BUSY_CLICK, BUSY_SUBMISSION, GAVE_UP
from bot.executor import LISTENER_THREADS
from bot.ids import ActionId, CallbackId
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_chain import AuditChainError
from store.audit_models import AuditEvent
from store.inbox import InboxRepository
from store.inbox_models import InboxItem, InboxKind, InboxStatus
from store.models import Decision
from tests.bot.flows import SEND, button, open_modal, result_message, start_run
from tests.conftest import Harness

TIMEOUT = 60


@pytest.fixture
def busy(serve_bot, sqlite_url) -> Iterator[tuple[Harness, threading.Event]]:  # type: ignore[no-untyped-def]
    """One worker and one queue slot, both taken by tasks that wait for ``release``."""
    h = serve_bot(sqlite_url, worker_threads=1, worker_queue=1)
    release = threading.Event()
    yield h, release
    release.set()


def fill(h: Harness, release: threading.Event) -> None:
    assert h.bot.settle(timeout=TIMEOUT)
    for _ in range(2):
        assert h.bot.services.executor.submit(release.wait, TIMEOUT) is not None
    assert h.bot.services.executor.submit(release.wait, TIMEOUT) is None, "the pool is full"


@pytest.fixture
def unwritable(monkeypatch) -> Iterator[threading.Event]:  # type: ignore[no-untyped-def]
    """The inbox refuses writes (e.g. the database is down) until the event is set."""
    healed, add_many = threading.Event(), InboxRepository.add_many

    def failing(self: InboxRepository, *args: object, **kwargs: object) -> list[int]:
        if not healed.is_set():
            raise RuntimeError("the database is unreachable")
        return add_many(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(InboxRepository, "add_many", failing)
    yield healed


@pytest.fixture
def unstorable(serve_bot, sqlite_url, unwritable) -> tuple[Harness, threading.Event]:  # type: ignore[no-untyped-def]
    """A bot whose inbox refuses writes until the event is set."""
    return serve_bot(sqlite_url), unwritable


def inbox(h: Harness) -> list[str]:
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(InboxItem.status).order_by(InboxItem.id)))


def free(h: Harness, release: threading.Event) -> None:
    release.set()
    assert h.bot.settle(timeout=TIMEOUT)


def drops(h: Harness) -> list[AuditEvent]:
    assert h.bot.listeners.wait_idle(timeout=TIMEOUT), "listeners still at work"
    assert h.bot.services.notices.wait_idle(timeout=TIMEOUT), "drops still being audited"
    with h.bot.db.transaction() as s:
        found = s.scalars(select(AuditEvent).where(AuditEvent.kind == "request_dropped")).all()
        s.expunge_all()
        return list(found)


def decisions(h: Harness) -> int:
    with h.bot.db.transaction() as s:
        return len(s.scalars(select(Decision)).all())


def test_clicks_and_submissions_while_every_worker_is_busy_are_decided_later(
    serve_bot, sqlite_url, monkeypatch
):
    """The only inbox worker is stuck in a decision: another Approve and a Reject submission
    are acked, stored, and decided once it is free; nobody is told to retry."""
    h = serve_bot(sqlite_url, worker_threads=1)
    stuck_root, stuck = start_run(h, SEND)
    clicked_root, clicked = start_run(h, SEND)
    rejected_root, rejected = start_run(h, SEND)
    engine, release, inside = h.bot.services.engine, threading.Event(), threading.Event()
    decide = engine.decide

    def slow(**kw: object):  # type: ignore[no-untyped-def]
        inside.set()
        assert release.wait(TIMEOUT)
        return decide(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "decide", slow)
    h.driver.click(user=people.RELEASE_MANAGER, message=stuck, button=button(stuck, "Approve"))
    assert inside.wait(TIMEOUT), "the only worker is busy"

    reply = h.driver.click(
        user=people.RELEASE_MANAGER, message=clicked, button=button(clicked, "Approve")
    )
    assert reply.status == 200
    modal = open_modal(h, people.RELEASE_MANAGER, rejected, "Reject")
    values = {"reject_reason": {"reason": "Not now"}}
    sent = h.driver.submit_view(user=people.RELEASE_MANAGER, view_id=modal.id, values=values)
    assert (sent.status, sent.body) == (200, ""), "the modal closes: the reason is stored"
    assert h.bot.listeners.wait_idle(timeout=TIMEOUT)
    assert inbox(h) == [InboxStatus.CLAIMED, InboxStatus.QUEUED, InboxStatus.QUEUED]
    assert decisions(h) == 0

    release.set()
    result_message(h, stuck_root)
    result_message(h, clicked_root)
    assert "Not now" in result_message(h, rejected_root).text
    assert h.bot.settle(timeout=TIMEOUT)
    assert inbox(h) == [InboxStatus.DONE] * 3
    assert decisions(h) == 3
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"] * 2
    assert h.state.ephemerals_for(people.RELEASE_MANAGER) == []
    assert drops(h) == []


def test_a_click_that_cannot_be_stored_is_told_at_once_audited_and_can_be_retried(
    serve_bot, sqlite_url, unwritable, monkeypatch
):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    approve = button(card, "Approve")

    engine = h.bot.services.engine
    audit_gate, record_dropped = threading.Event(), engine.record_dropped
    monkeypatch.setattr(
        engine,
        "record_dropped",
        lambda **kw: audit_gate.wait(TIMEOUT) and record_dropped(**kw),
    )
    reply = h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    assert reply.status == 200, "acked while the drop is still being recorded"
    audit_gate.set()

    note = h.state.wait_for(lambda: h.state.ephemerals_for(people.RELEASE_MANAGER))
    assert [(n.channel, n.text) for n in note] == [(card.channel, BUSY_CLICK)]
    [dropped] = drops(h)
    assert (dropped.actor_id, dropped.outcome, dropped.reason) == (
        people.RELEASE_MANAGER,
        "refused",
        "busy",
    )
    assert dropped.action_id == approve.value.split(":")[0]
    assert dropped.request_id is not None
    assert dropped.detail == {"dropped": ActionId.APPROVE}
    assert decisions(h) == 0 and h.workspace.effects() == [] and inbox(h) == []

    unwritable.set()
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


@pytest.mark.parametrize(
    ("label", "callback", "values", "first_input"),
    [
        (
            "Reject",
            CallbackId.REJECT_MODAL,
            {"reject_reason": {"reason": "Not now"}},
            "reject_reason",
        ),
        ("Edit", CallbackId.EDIT_MODAL, {"arg:text": {"value": "Edited"}}, "arg:recipient"),
    ],
)
def test_a_submission_that_cannot_be_stored_keeps_the_modal_open_is_audited_and_can_be_resent(
    unstorable, label, callback, values, first_input
):
    h, unwritable = unstorable
    root, card = start_run(h, SEND)
    modal = open_modal(h, people.RELEASE_MANAGER, card, label)

    reply = h.driver.submit_view(user=people.RELEASE_MANAGER, view_id=modal.id, values=values)
    assert reply.status == 200
    assert reply.json() == {"response_action": "errors", "errors": {first_input: BUSY_SUBMISSION}}
    assert h.state.views[modal.id].open, "the modal stays open with what was entered"
    [dropped] = drops(h)
    assert (dropped.actor_id, dropped.reason, dropped.detail) == (
        people.RELEASE_MANAGER,
        "busy",
        {"dropped": callback},
    )
    assert dropped.action_id == button(card, label).value.split(":")[0]
    assert decisions(h) == 0

    unwritable.set()
    again = h.driver.submit_view(user=people.RELEASE_MANAGER, view_id=modal.id, values=values)
    assert (again.status, again.body) == (200, "")
    result = result_message(h, root)
    if label == "Reject":
        assert "Not now" in result.text and h.workspace.effects() == []
    else:
        assert [e["text"] for e in h.workspace.effects()] == ["Edited"]


def test_a_dropped_submission_of_a_form_without_inputs_gets_a_notice_on_top(
    serve_bot, sqlite_url, unwritable
):
    """Slack shows errors on inputs only: a form with none keeps its place under a notice."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    payload = {
        "type": "view_submission",
        "user": {"id": people.RELEASE_MANAGER, "team_id": "T0SANDBOX"},
        "team": {"id": "T0SANDBOX"},
        "view": {
            "id": "V0NOINPUTS",
            "type": "modal",
            "callback_id": CallbackId.EDIT_MODAL,
            "private_metadata": button(card, "Edit").value,
            "blocks": [{"type": "section", "block_id": "tool"}],
            "state": {"values": {}},
        },
    }
    reply = h.driver.post(urlencode({"payload": json.dumps(payload)}))
    answer = reply.json()
    assert answer["response_action"] == "push"
    assert BUSY_SUBMISSION in json.dumps(answer["view"])
    assert [d.detail for d in drops(h)] == [{"dropped": CallbackId.EDIT_MODAL}]
    assert decisions(h) == 0


def test_a_dropped_slash_command_is_answered_and_audited(busy):
    h, release = busy
    fill(h, release)
    reply = h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
    assert reply.status == 200
    told = h.state.wait_for(lambda: list(h.state.responses))
    assert [r.get("text") for r in told] == [BUSY]
    [dropped] = drops(h)
    assert (dropped.actor_id, dropped.detail) == (people.REQUESTER, {"dropped": "/agent"})
    assert h.state.top_level(people.CHANNEL) == []

    free(h, release)
    _root, card = start_run(h, SEND)
    assert buttons(card)


def test_slow_busy_notices_never_delay_acks_and_each_drop_is_told_and_audited_once(
    serve_bot, sqlite_url, unwritable
):
    """Every busy notice is held by Slack: more clicks than there are threads for the work
    after an ack are still acked (a late ack is Bolt's 404), then each is told once and
    audited once."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    approve = button(card, "Approve")
    clicks = LISTENER_THREADS + 4
    held = [h.sandbox.misbehave("chat.postEphemeral", hold=True) for _ in range(clicks)]

    replies = [
        h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve).status
        for _ in range(clicks)
    ]
    assert replies == [200] * clicks
    assert held[0].reached.wait(TIMEOUT), "a notice is on its way"
    for notice in held:
        notice.release.set()

    assert len(drops(h)) == clicks
    told = h.state.ephemerals_for(people.RELEASE_MANAGER)
    assert [e.text for e in told] == [BUSY_CLICK] * clicks
    assert decisions(h) == 0


def test_a_dropped_slash_command_without_a_response_url_is_told_in_its_channel(busy):
    h, release = busy
    fill(h, release)
    form = {
        "team_id": "T0SANDBOX",
        "channel_id": people.CHANNEL,
        "user_id": people.REQUESTER,
        "command": "/agent",
        "text": SEND,
    }
    assert h.driver.post(urlencode(form)).status == 200
    [dropped] = drops(h)
    assert dropped.detail == {"dropped": "/agent"}
    told = h.state.wait_for(lambda: h.state.ephemerals_for(people.REQUESTER))
    assert [(e.channel, e.text) for e in told] == [(people.CHANNEL, BUSY)]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (AuditChainError("the audit chain does not verify"), AUDIT_UNWRITABLE),
        (RuntimeError("something nobody planned for"), GAVE_UP),
    ],
)
def test_an_error_in_a_decision_reaches_the_reviewer(
    serve_bot, sqlite_url, monkeypatch, error, expected
):
    """A known cause is told at once; an unexpected one after the last of its tries."""
    monkeypatch.setattr(inbox_runner, "RETRY_AFTER", dt.timedelta(0))
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)

    def broken(**_kw: object) -> None:
        raise error

    monkeypatch.setattr(h.bot.services.engine, "decide", broken)
    reply = h.driver.click(
        user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve")
    )
    assert reply.status == 200
    told = h.state.wait_for(lambda: h.state.ephemerals_for(people.RELEASE_MANAGER))
    assert [(e.channel, e.text) for e in told] == [(card.channel, expected)]
    assert decisions(h) == 0
    [dropped] = drops(h)  # audited before the user is told
    assert dropped.reason == "failed"


def test_a_passing_error_is_tried_again_and_decided_without_troubling_the_reviewer(
    serve_bot, sqlite_url, monkeypatch
):
    monkeypatch.setattr(inbox_runner, "RETRY_AFTER", dt.timedelta(0))
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    engine = h.bot.services.engine
    decide, failures = engine.decide, []

    def once_broken(**kwargs: object) -> object:
        if not failures:
            failures.append(1)
            raise RuntimeError("the database blinked")
        return decide(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "decide", once_broken)
    reply = h.driver.click(
        user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve")
    )
    assert reply.status == 200
    assert h.bot.settle(timeout=TIMEOUT)
    assert failures == [1] and decisions(h) == 1
    assert h.state.ephemerals_for(people.RELEASE_MANAGER) == []
    with h.bot.db.transaction() as s:
        assert s.scalars(select(InboxItem.status)).all() == [InboxStatus.DONE]


def test_an_unreadable_stored_item_is_failed_once_not_worked_on_again(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    assert h.bot.services.store(InboxKind.APPROVE, {"who": "U1", "what": "approve"})
    assert h.bot.settle(timeout=TIMEOUT)
    with h.bot.db.transaction() as s:
        item = s.scalars(select(InboxItem)).one()
        assert (item.status, item.attempts) == (InboxStatus.FAILED, 1)
        assert (item.last_error or "").startswith("unreadable")


def test_an_approve_is_acked_and_decided_while_every_modal_being_opened_waits_on_slack(
    serve_bot, sqlite_url
):
    """More modals being opened than Bolt has listener threads, each held by a slow
    ``views.open``, keep no click waiting for its ack (Bolt answers a late one with a 404):
    listeners hand what waits on Slack after their ack to a pool of its own."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    clicked_root, clicked = start_run(h, SEND)
    modals = LISTENER_THREADS + 2
    held = [h.sandbox.misbehave("views.open", hold=True) for _ in range(modals)]
    reject = button(card, "Reject")
    try:
        replies = [
            h.driver.click(user=people.RELEASE_MANAGER, message=card, button=reject).status
            for _ in range(modals)
        ]
        assert replies == [200] * modals
        assert all(each.reached.wait(TIMEOUT) for each in held[:LISTENER_THREADS])

        approve = button(clicked, "Approve")
        reply = h.driver.click(user=people.RELEASE_MANAGER, message=clicked, button=approve)
        assert reply.status == 200
        assert result_message(h, clicked_root).text.startswith("Run ")
    finally:
        for each in held:
            each.release.set()
    assert h.bot.settle(timeout=TIMEOUT)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
