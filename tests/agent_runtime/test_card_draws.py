"""One process's updates of a card: one at a time, never one from an older state than one
already sent while the card is kept, and nothing remembered once nobody holds the card."""

from __future__ import annotations

import threading
from dataclasses import replace

from agent_runtime.card_draws import CardDraws, rank_of
from agent_runtime.views import ApprovalView, approval_view
from store.repositories import ApprovalRepository
from store.statuses import RequestStatus
from tests.agent_runtime.rows import seed_request, sqlite_store


def _pending(tmp_path) -> ApprovalView:  # type: ignore[no-untyped-def]
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    with db.transaction() as s:
        view = approval_view(ApprovalRepository(s).get(seeded.request_id))
    db.dispose()
    return view


def test_stages_and_decisions_order_the_drawings(tmp_path):
    pending = _pending(tmp_path)
    resuming = replace(pending, status=RequestStatus.RESUMING)
    ends = [replace(pending, status=status) for status in ("resolved", "expired", "cancelled")]
    assert rank_of(pending) < rank_of(resuming)
    assert all(rank_of(resuming) < rank_of(end) == rank_of(ends[0]) for end in ends)


def test_an_older_drawing_is_behind_while_the_card_is_kept(tmp_path):
    pending = _pending(tmp_path)
    resolved = replace(pending, status=RequestStatus.RESOLVED)
    draws = CardDraws()
    with draws.kept(pending.id):
        with draws.turn(resolved) as turn:
            assert not turn.behind
            turn.sent()
        with draws.turn(pending) as turn:
            assert turn.behind
        with draws.turn(resolved) as turn:
            assert not turn.behind, "the same state may be drawn again (a repair)"
    with draws.turn(pending) as turn:
        assert not turn.behind, "forgotten once nobody held the card"


def test_an_update_not_sent_leaves_nothing_remembered(tmp_path):
    pending = _pending(tmp_path)
    draws = CardDraws()
    with draws.kept(pending.id):
        with draws.turn(replace(pending, status=RequestStatus.RESOLVED)):
            pass  # Slack refused it
        with draws.turn(pending) as turn:
            assert not turn.behind


def test_a_second_update_waits_for_the_one_in_flight(tmp_path):
    pending = _pending(tmp_path)
    draws = CardDraws()
    order: list[str] = []
    second_started = threading.Event()

    def second() -> None:
        second_started.set()
        with draws.turn(pending):
            order.append("second")

    with draws.turn(pending):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert second_started.wait(30)
        waiter.join(0.2)  # it cannot finish while the turn is held
        order.append("first")
    waiter.join(30)
    assert order == ["first", "second"]
