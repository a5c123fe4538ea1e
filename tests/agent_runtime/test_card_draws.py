"""One process's updates of a card: none from an older state than one it sent, and none marked
as shown while an older one is on its way; nothing waits, and the memory stays bounded."""

from __future__ import annotations

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


def test_an_older_drawing_is_behind_once_a_later_one_was_sent(tmp_path):
    pending = _pending(tmp_path)
    resolved = replace(pending, status=RequestStatus.RESOLVED)
    draws = CardDraws()
    with draws.turn(resolved) as turn:
        assert not turn.behind
        turn.sent()
    with draws.turn(pending) as turn:
        assert turn.behind
    with draws.turn(resolved) as turn:
        assert not turn.behind, "the same state may be drawn again (a repair)"


def test_an_update_not_sent_leaves_nothing_remembered(tmp_path):
    pending = _pending(tmp_path)
    draws = CardDraws()
    with draws.turn(replace(pending, status=RequestStatus.RESOLVED)):
        pass  # Slack refused it
    with draws.turn(pending) as turn:
        assert not turn.behind


def test_only_the_latest_cards_are_remembered(tmp_path):
    pending = _pending(tmp_path)
    draws = CardDraws(remembered=2)
    for card_id in ("a", pending.id, "b", "c"):
        with draws.turn(replace(pending, id=card_id, status=RequestStatus.RESOLVED)) as turn:
            turn.sent()
    with draws.turn(replace(pending, id="c")) as turn:
        assert turn.behind
    with draws.turn(pending) as turn:
        assert not turn.behind, "forgotten: two cards were drawn since"


def test_an_update_landing_while_an_older_one_is_on_its_way_knows_it(tmp_path):
    pending = _pending(tmp_path)
    resuming = replace(pending, status=RequestStatus.RESUMING)
    resolved = replace(pending, status=RequestStatus.RESOLVED)
    draws = CardDraws()
    with draws.turn(resuming) as older:
        with draws.turn(resolved) as end:
            end.sent()
            assert end.older_in_flight
            assert not older.older_in_flight, "a later update on its way is no threat to it"
        with draws.turn(resolved) as again:
            assert again.older_in_flight
    with draws.turn(resolved) as alone:
        assert not alone.older_in_flight
    with draws.turn(pending) as other:
        assert other.behind
    with draws.turn(replace(pending, id="another card", status="resolved")) as unrelated:
        assert not unrelated.older_in_flight
