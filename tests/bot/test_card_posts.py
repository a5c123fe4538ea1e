"""Cards in spite of Slack: a card post that fails is posted again by the reconciler, one that
Slack took while the bot never heard back is found and adopted (never posted twice), and a slow
Slack call holds up no other approval (none is made inside a database transaction)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import select

from bot.blocks.approval_card import HEADERS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.state import Message
from store.models import Decision
from tests.bot.flows import (
    DELETE,
    FINAL_HEADER,
    PUBLISH,
    SEND,
    button,
    card_header,
    card_now,
    cards_in,
    results_in,
    settled,
    start_run,
)
from tests.conftest import Harness

WAIT = 60.0  # bounds each wait; an approval takes a second or two
WHILE_HELD = 25.0
"""Bounds a wait made while a Slack call hangs: below slack_sdk's 30-s timeout, after which a
call made inside a transaction would give up and let the blocked approval through anyway."""


def card_post(args: dict[str, Any]) -> bool:
    return (args.get("metadata") or {}).get("event_type") == "approval_card"


def ask(h: Harness, text: str = SEND) -> Message:
    """Slash command -> the run's root message (its card may or may not follow)."""
    before = {m.ts for m in h.state.top_level(people.CHANNEL)}
    assert h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=text).status
    return h.state.wait_for(
        lambda: next((m for m in h.state.top_level(people.CHANNEL) if m.ts not in before), None)
    )


def card_of(h: Harness, root: Message) -> Message:
    return h.state.wait_for(lambda: next((m for m in cards_in(h.state, root) if buttons(m)), None))


def approve(h: Harness, card: Message, user: str = people.RELEASE_MANAGER) -> None:
    h.driver.click(user=user, message=card, button=button(card, "Approve"))


def approve_and_finish(h: Harness, root: Message, *, card: Message, wait: float = WAIT) -> None:
    approve(h, card)
    h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=wait)


def test_a_card_post_refused_once_is_posted_by_the_reconciler_and_works(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, card_retry_seconds=0)
    refused = h.sandbox.misbehave("chat.postMessage", match=card_post, error="internal_error")
    root = ask(h)
    assert refused.reached.wait(WAIT)
    assert h.bot.services.executor.wait_idle(WAIT)  # the run is done with its failed post
    assert cards_in(h.state, root) == []
    assert h.bot.engine.reconcile().cards_posted == 1
    (card,) = cards_in(h.state, root)
    approve_and_finish(h, root, card=card)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


@pytest.mark.parametrize(
    "lost",
    [{"error": "internal_error", "takes_effect": True}, {"drop": True}],
    ids=["answered_with_an_error", "connection_dropped"],
)
def test_a_card_slack_took_whose_answer_was_lost_is_adopted(serve_bot, sqlite_url, lost):
    h = serve_bot(sqlite_url, card_retry_seconds=0)
    h.sandbox.misbehave("chat.postMessage", match=card_post, **lost)
    root = ask(h)
    card = card_of(h, root)  # in Slack, though the bot was not told where
    assert h.bot.services.executor.wait_idle(WAIT)
    assert h.bot.engine.reconcile().cards_posted == 1
    assert [m.ts for m in cards_in(h.state, root)] == [card.ts], "the card was posted twice"
    request_id = card.metadata["event_payload"]["request_id"]  # type: ignore[index]
    assert h.bot.services.engine.approval(request_id).card_ts == card.ts  # type: ignore[union-attr]
    approve_and_finish(h, root, card=card)


def test_a_slow_card_post_holds_up_no_other_approval(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    first_root, first_card = start_run(h, SEND)
    slow = h.sandbox.misbehave("chat.postMessage", match=card_post, hold=True)
    try:
        second_root = ask(h, DELETE)
        assert slow.reached.wait(WAIT)
        approve_and_finish(h, first_root, card=first_card, wait=WHILE_HELD)  # the other post hangs
    finally:
        slow.release.set()
    second_card = card_of(h, second_root)
    approve_and_finish(h, second_root, card=second_card)


def test_a_click_before_the_card_reference_is_stored_updates_that_card(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    slow = h.sandbox.misbehave("chat.postMessage", match=card_post, hold=True)
    try:
        root = ask(h)
        card = card_of(h, root)  # posted; the bot has not heard back yet
        pending = card_header(card)  # the sandbox's message is live: keep its header now
        approve(h, card)
        h.state.wait_for(lambda: card_header(card) != pending, timeout=WHILE_HELD)
    finally:
        slow.release.set()
    h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=WAIT)
    assert [m.ts for m in cards_in(h.state, root)] == [card.ts]


def test_a_slow_user_group_look_up_holds_up_no_other_approval(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    group_root, group_card = start_run(h, SEND)
    other_root, other_card = start_run(h, DELETE)
    # The cards' pings looked the group up (to leave the requester out): start from cold.
    assert h.bot.services.executor.wait_idle(WAIT)
    assert h.bot.services.directory is not None
    h.bot.services.directory.forget()
    slow = h.sandbox.misbehave("usergroups.users.list", hold=True)
    try:
        approve(h, group_card, user=people.GROUP_ONLY)  # a release manager through the group
        assert slow.reached.wait(WAIT)
        approve_and_finish(h, other_root, card=other_card, wait=WHILE_HELD)
    finally:
        slow.release.set()
    h.state.wait_for(lambda: settled(h.state, group_root, card=group_card), timeout=WAIT)


def update_of(card: Message) -> Any:
    return lambda args: args.get("ts") == card.ts


def resuming_update_of(card: Message) -> Any:
    """The update that shows the card's request under way, not the final one: a resume may be
    quick enough that the final update reaches Slack first."""
    under_way = HEADERS["resuming"]
    return lambda args: args.get("ts") == card.ts and under_way in str(args.get("blocks"))


def test_a_slow_card_update_holds_up_no_resume(serve_bot, sqlite_url):
    """The card's "resuming" update goes out while the run resumes, not before it."""
    h = serve_bot(sqlite_url, resuming_card_after_seconds=0)
    root, card = start_run(h, SEND)
    slow = h.sandbox.misbehave("chat.update", match=resuming_update_of(card), hold=True)
    try:
        approve(h, card)
        assert slow.reached.wait(WAIT)
        h.state.wait_for(lambda: results_in(h.state, root), timeout=WHILE_HELD)
    finally:
        slow.release.set()
    h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=WAIT)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_a_slow_redraw_by_the_start_of_a_card_clicked_before_it_was_kept_holds_up_no_resume(
    serve_bot, sqlite_url
):
    """The first of two sign-offs came before the bot heard back from the card's post: the
    start then finds the request moved on and draws the card again. That update, slow, must
    not hold up the second sign-off's resume (the start holds the run's lock until it is done
    with the card)."""
    h = serve_bot(sqlite_url, resuming_card_after_seconds=60)  # the decision draws once
    post = h.sandbox.misbehave("chat.postMessage", match=card_post, hold=True)
    root = ask(h, PUBLISH)
    card = card_of(h, root)  # in Slack; the bot has not heard back
    assert post.reached.wait(WAIT)
    approve(h, card)
    # The decision's own update of the card (the click told where it is) lands first.
    h.state.wait_for(lambda: one_sign_off(card_now(h, card).blocks), timeout=WAIT)
    slow = h.sandbox.misbehave(
        "chat.update", match=lambda a: one_sign_off(a.get("blocks")), hold=True
    )
    try:
        post.release.set()
        assert slow.reached.wait(WAIT), "the start draws the card again"
        approve(h, card, user=people.RELEASE_MANAGER_2)
        h.state.wait_for(lambda: results_in(h.state, root), timeout=WHILE_HELD)
    finally:
        slow.release.set()
    h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=WAIT)
    assert [e["tool"] for e in h.workspace.effects()] == ["publish_report"]


def test_a_card_clicked_into_its_resume_before_it_was_kept_is_drawn_by_that_resume(
    serve_bot, sqlite_url
):
    """The click that completed the request came before the bot heard back from the card's
    post: the start leaves the card to the resume, which draws its end."""
    h = serve_bot(sqlite_url, resuming_card_after_seconds=60)
    post = h.sandbox.misbehave("chat.postMessage", match=card_post, hold=True)
    root = ask(h)
    card = card_of(h, root)
    assert post.reached.wait(WAIT)
    approve(h, card)
    _decided(h, count=1)
    post.release.set()
    h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=WAIT)
    assert h.bot.settle(timeout=WAIT)
    assert h.bot.engine.reconcile().cards == 0, "the card is remembered as showing the end"


def one_sign_off(blocks: object) -> bool:
    """The card still waiting, with one sign-off of two on it."""
    return "Sign-offs: 1 of 2" in str(blocks)


def _decided(h: Harness, *, count: int) -> None:
    """Until ``count`` decisions are recorded (a click's, acked before it is)."""
    deadline = time.monotonic() + WAIT
    while True:
        with h.bot.db.transaction() as s:
            recorded = len(list(s.scalars(select(Decision.id))))
        if recorded == count:
            return
        assert time.monotonic() < deadline, recorded
        time.sleep(0.01)  # polling the store, which has no event to wait on


def test_a_card_update_slack_applies_last_is_drawn_again(serve_bot, sqlite_url):
    """Slack applies the "resuming" update after the final one: the card is drawn again, and
    ends showing the decision, without buttons."""
    h = serve_bot(sqlite_url, resuming_card_after_seconds=0)
    root, card = start_run(h, SEND)
    late = h.sandbox.misbehave("chat.update", match=resuming_update_of(card), late=True)
    try:
        approve(h, card)
        assert late.reached.wait(WAIT)
        h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=WHILE_HELD)
        drawn = card_now(h, card).edits
    finally:
        late.release.set()
    # The late update lands (the card shows "resuming" for a moment), then it is redrawn.
    h.state.wait_for(lambda: card_now(h, card).edits >= drawn + 2, timeout=WAIT)
    assert h.bot.inbox.wait_idle(WAIT)
    now = card_now(h, card)
    assert card_header(now) == FINAL_HEADER and not buttons(now)
    assert h.bot.engine.reconcile().cards == 0, "the card is remembered as showing the end"


def test_a_quick_resume_updates_its_card_once_with_the_result(serve_bot, sqlite_url):
    """Slack's rate limits count every update in a busy channel: a resume that ends before
    it would be shown as under way updates the card once, from buttons to the result."""
    h = serve_bot(sqlite_url, resuming_card_after_seconds=60)
    root, card = start_run(h, SEND)
    assert h.bot.services.executor.wait_idle(WAIT)  # the card is posted and drawn
    drawn = card_now(h, card).edits
    approve(h, card)
    h.state.wait_for(lambda: settled(h.state, root, card=card), timeout=WAIT)
    assert h.bot.inbox.wait_idle(WAIT)
    assert card_now(h, card).edits == drawn + 1
    assert card_header(card_now(h, card)) == FINAL_HEADER
