"""One process's updates of a card: none from an older state than one it sent, and none marked
as shown while an older one is on its way; nothing waits, and the memory stays bounded."""

from __future__ import annotations

from dataclasses import replace

from agent_runtime.card_draws import CardDraws, Landing, rank_of
from agent_runtime.views import ApprovalView, DecisionView, approval_view
from store.models import utcnow
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


def test_stages_then_decisions_order_the_drawings(tmp_path):
    pending = _pending(tmp_path)
    resuming = replace(pending, status=RequestStatus.RESUMING)
    ended = ("resolved", "expired", "cancelled", "invalidated", "failed")
    ends = [replace(pending, status=status) for status in ended]
    assert rank_of(pending) < rank_of(resuming)
    assert all(rank_of(resuming) < rank_of(end) == rank_of(ends[0]) for end in ends)
    action = pending.actions[0]
    signed = DecisionView(reviewer_id="U0REL1", type="approve", message=None, at=utcnow())
    decided = replace(action, decisions=(*action.decisions, signed))
    assert rank_of(pending) < rank_of(replace(pending, actions=(decided,)))


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


def test_overlapping_updates_leave_the_card_to_the_last_one_back(tmp_path):
    """Whichever comes back first: until the card is quiet again, nobody may mark it; the
    last one back learns that the spell had overlaps."""
    pending = _pending(tmp_path)
    resuming = replace(pending, status=RequestStatus.RESUMING)
    resolved = replace(pending, status=RequestStatus.RESOLVED)
    draws = CardDraws()
    with draws.turn(resuming) as older:
        assert older.overlapping_oldest is None
        with draws.turn(resolved) as end:
            assert end.overlapping_oldest == RequestStatus.RESUMING, "the oldest on its way"
            end.sent()
            assert end.back() == Landing(last=False, overlapped=True)
        assert older.back() == Landing(last=True, overlapped=True)
    with draws.turn(resolved) as alone:
        assert alone.overlapping_oldest is None
        assert alone.back() == Landing(last=True, overlapped=False), "quiet again"
    with draws.turn(pending) as other:
        assert other.behind


def test_the_oldest_on_the_way_is_told_whichever_started_first(tmp_path):
    pending = _pending(tmp_path)
    two = replace(pending, status=RequestStatus.RESOLVED)
    draws = CardDraws()
    with draws.turn(two), draws.turn(pending) as older:
        assert older.overlapping_oldest == RequestStatus.PENDING
    with draws.turn(replace(pending, id="another card")) as unrelated:
        assert unrelated.overlapping_oldest is None
        assert unrelated.back() == Landing(last=True, overlapped=False)
