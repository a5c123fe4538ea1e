"""Acks before decision work: while a burst of Slack requests is being answered, a stored
click's decision work waits its turn (for a bounded time), and then goes on as usual."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from urllib.parse import urlencode

from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk.socket_mode.request import SocketModeRequest
from sqlalchemy import select

from bot.ack_first import AckFirst
from bot.metrics import Metrics
from bot.sandbox import people
from bot.socket_mode import CheckedSocketModeHandler
from store.inbox_models import InboxItem
from tests.bot.flows import (
    FINAL_HEADER,
    SEND,
    button,
    card_header,
    card_now,
    result_message,
    start_run,
)


def _until(check, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        threading.Event().wait(0.005)


def test_a_lone_request_does_not_hold_a_worker_back() -> None:
    """It is usually the click that handed the item over."""
    first = AckFirst(patience=30)
    with first.answering():
        assert first.wait_turn() is False


def test_a_worker_waits_while_two_are_answered_and_goes_on_as_one_ends() -> None:
    first = AckFirst(patience=30)
    outcome: list[bool] = []
    with ExitStack() as answers:
        answers.enter_context(first.answering())
        second = answers.enter_context(ExitStack())
        second.enter_context(first.answering())
        worker = threading.Thread(target=lambda: outcome.append(first.wait_turn()))
        worker.start()
        _until(lambda: first.waiting == 1)
        assert outcome == []
        second.close()  # one of the two answered
        worker.join(timeout=10)
    assert outcome == [True] and first.waiting == 0


def test_a_worker_waits_no_longer_than_its_patience() -> None:
    """A steady stream of requests never starves the decision work."""
    first = AckFirst(patience=0.05)
    with first.answering(), first.answering():
        started = time.monotonic()
        assert first.wait_turn() is True
        assert time.monotonic() - started >= 0.05
    assert AckFirst(patience=0).wait_turn() is False


def test_a_click_stored_during_a_burst_is_decided_once_the_burst_is_answered(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, ack_first_seconds=5)
    root, card = start_run(h, SEND)
    turns = h.bot.services.ack_first
    turns.patience = 600  # longer than the settings allow: a slow machine must not end the wait
    with ExitStack() as burst:
        burst.enter_context(turns.answering())
        burst.enter_context(turns.answering())  # two other requests being answered
        clicked = h.driver.click(
            user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve")
        )
        assert clicked.status == 200  # acked at once
        _until(lambda: turns.waiting == 1)
        assert card_header(card_now(h, card)) != FINAL_HEADER
        assert h.workspace.effects() == []
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
    assert h.bot.services.metrics.count("inbox_waits_for_acks") == 1


def test_an_item_waiting_its_turn_keeps_its_lease(serve_bot, sqlite_url):
    """ACK_FIRST_SECONDS may be longer than a third of CLAIM_LEASE_SECONDS: the lease is renewed
    while the worker waits, so no other worker takes the item over as if its worker had died."""
    h = serve_bot(sqlite_url, ack_first_seconds=5, claim_lease_seconds=1)
    root, card = start_run(h, SEND)
    turns = h.bot.services.ack_first

    def lease() -> tuple[dt.datetime | None, int]:
        """The item's lease and how often it was claimed."""
        with h.bot.db.transaction() as s:
            item = s.scalars(select(InboxItem)).one()
            return item.lease_until, item.attempts

    with ExitStack() as burst:
        burst.enter_context(turns.answering())
        burst.enter_context(turns.answering())
        h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
        _until(lambda: turns.waiting == 1)
        first, _attempts = lease()
        assert first is not None
        _until(lambda: lease()[0] != first, timeout=3)  # renewed every third of a second
        assert lease()[1] == 1, "the item was claimed again while its worker waited"
        assert turns.waiting == 1
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_a_socket_mode_delivery_is_a_request_being_answered(monkeypatch):
    """``serve`` in Socket Mode answers Slack in the same process as its inbox workers too."""
    turns = AckFirst(patience=0.01)
    held_back: list[bool] = []

    def answer(_handler: object, _client: object, _req: object) -> None:
        with turns.answering():  # one more request being answered meanwhile
            held_back.append(turns.wait_turn())

    monkeypatch.setattr(SocketModeHandler, "handle", answer)
    handler = object.__new__(CheckedSocketModeHandler)
    handler.bot = SimpleNamespace(services=SimpleNamespace(ack_first=turns, metrics=Metrics()))
    handler.handle(None, SocketModeRequest(type="events_api", envelope_id="e1", payload={}))
    assert held_back == [True]


def test_only_a_signed_request_counts_as_being_answered(serve_bot, sqlite_url, monkeypatch):
    """Anyone can send unsigned POSTs: they must not hold the inbox workers back."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    counted: list[str] = []
    turns = h.bot.services.ack_first
    answering = turns.answering

    @contextmanager
    def noted() -> Iterator[None]:
        counted.append("answered")
        with answering():
            yield

    monkeypatch.setattr(turns, "answering", noted)
    body = urlencode(
        {
            "payload": json.dumps(
                h.driver.block_action_payload(
                    user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve")
                )
            )
        }
    )
    assert h.driver.post(body, signature="v0=" + "f" * 64).status == 401
    assert counted == []
    assert h.driver.post(body).status == 200
    assert counted == ["answered"]
