"""The resumer alone, on a fake thread: it refuses to resume what it cannot verify, reports a
failed resume for its caller to act on, and never resumes a request it does not hold."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from sqlalchemy import event

from agent_runtime.announcer import Announcer
from agent_runtime.catalog import ToolCatalog
from agent_runtime.claims import Claims
from agent_runtime.notifier import NullNotifier
from agent_runtime.policy import load_policy
from agent_runtime.resume import NOTHING, Resumer
from agent_runtime.views import ApprovalView, RunView, approval_view
from store.locks import ThreadLocks
from store.models import utcnow
from store.repositories import ApprovalRepository, RunRepository
from store.statuses import ActionOutcome, RequestStatus, RunStatus
from tests.agent_runtime.rows import seed_request, sqlite_store

NOT_WAITING = "the run is no longer waiting for this approval"


@dataclass
class FakeThread:
    """A thread with no checkpoint (``created_at`` None) or no interrupt waiting."""

    created: bool = True
    invoked: list[Any] = field(default_factory=list)
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
    read: int = 0

    def state(self, thread_id: str) -> Any:
        self.read += 1
        return SimpleNamespace(
            created_at=utcnow() if self.created else None, interrupts=(), next=(), values={}
        )

    def invoke(self, payload: Any, thread_id: str) -> None:
        self.invoked.append(payload)


@dataclass
class Told(NullNotifier):
    results: list[RunView] = field(default_factory=list)
    cards: list[ApprovalView] = field(default_factory=list)

    def run_finished(self, run: RunView) -> None:
        self.results.append(run)

    def approval_updated(self, approval: ApprovalView) -> None:
        self.cards.append(approval)


def resumer_on(tmp_path, thread: FakeThread, *, claimed_by: str = "me"):  # type: ignore[no-untyped-def]
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    claims = Claims(db=db, clock=utcnow, lease=dt.timedelta(minutes=1), owner="me")
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        request.actions[0].outcome = ActionOutcome.APPROVED
        other = Claims(db=db, clock=utcnow, lease=dt.timedelta(minutes=1), owner=claimed_by)
        assert other.claim(s, seeded.request_id)
    told = Told()
    announcer = Announcer(db=db, notifier=told, locks=ThreadLocks(db))
    resumer = Resumer(
        db=db,
        runtime=thread,  # type: ignore[arg-type]
        policy=load_policy(None),
        claims=claims,
        announcer=announcer,
    )
    return db, seeded, resumer, told


def statuses(db, seeded):  # type: ignore[no-untyped-def]
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        run = RunRepository(s).get(seeded.run_id)
        return request.status, run.status


def test_a_thread_with_no_checkpoint_is_never_started_afresh(tmp_path):
    thread = FakeThread(created=False)
    db, seeded, resumer, told = resumer_on(tmp_path, thread)
    assert resumer.resume(seeded.request_id).run_failed == "the run's thread is gone"
    assert thread.invoked == []
    assert statuses(db, seeded) == (RequestStatus.INVALIDATED, RunStatus.FAILED)
    assert told.results == [], "its caller tells the thread"


def test_an_invalidated_request_tells_its_thread_at_once(tmp_path):
    thread = FakeThread()
    db, seeded, resumer, told = resumer_on(tmp_path, thread, claimed_by="nobody")
    with db.transaction() as s:  # back to pending: the policy changed before anyone decided
        request = ApprovalRepository(s).get(seeded.request_id)
        request.status, request.claimed_by = RequestStatus.PENDING, None
    resumer.invalidate(seeded.request_id, reason="the approval policy changed")
    assert statuses(db, seeded) == (RequestStatus.INVALIDATED, RunStatus.FAILED)
    assert [r.id for r in told.results] == [seeded.run_id]
    resumer.invalidate(seeded.request_id, reason="again")
    assert len(told.results) == 1, "one caller wins the claim"


def test_a_thread_no_longer_waiting_is_not_resumed(tmp_path):
    thread = FakeThread()
    db, seeded, resumer, _told = resumer_on(tmp_path, thread)
    assert resumer.resume(seeded.request_id).run_failed == NOT_WAITING
    assert thread.invoked == []
    assert statuses(db, seeded)[0] == RequestStatus.INVALIDATED


def test_a_request_held_by_another_process_is_left_alone(tmp_path):
    thread = FakeThread(created=False)
    db, seeded, resumer, told = resumer_on(tmp_path, thread, claimed_by="someone-else")
    assert resumer.resume(seeded.request_id) == NOTHING
    assert statuses(db, seeded) == (RequestStatus.RESUMING, RunStatus.WAITING)
    assert told.results == []


def _as_claimed(db, seeded):  # type: ignore[no-untyped-def]
    """The request as the claiming transaction read it (what a decision hands the resumer)."""
    with db.transaction() as s:
        return ApprovalRepository(s).get(seeded.request_id)


def test_a_claim_taken_over_after_the_decision_read_it_is_left_alone(tmp_path):
    thread = FakeThread(created=False)  # were it resumed, it would be invalidated
    db, seeded, resumer, told = resumer_on(tmp_path, thread)
    claimed = _as_claimed(db, seeded)
    with db.transaction() as s:  # our lease ran out and another process took the claim
        ApprovalRepository(s).get(seeded.request_id).claimed_by = "someone-else"
    assert resumer.resume(seeded.request_id, claimed=claimed) == NOTHING
    assert statuses(db, seeded) == (RequestStatus.RESUMING, RunStatus.WAITING)
    assert thread.invoked == [] and told.results == []


def test_a_run_cancelled_after_the_decision_read_it_is_not_resumed(tmp_path):
    thread = FakeThread()
    db, seeded, resumer, _told = resumer_on(tmp_path, thread)
    claimed = _as_claimed(db, seeded)
    with db.transaction() as s:  # cancelled between the decision's commit and the resume
        RunRepository(s).get(seeded.run_id).status = RunStatus.CANCELLED
    assert resumer.resume(seeded.request_id, claimed=claimed) == NOTHING
    assert thread.invoked == []
    assert statuses(db, seeded) == (RequestStatus.CANCELLED, RunStatus.CANCELLED)


def test_an_unchanged_claim_is_resumed_from_the_decision_read(tmp_path):
    """Nothing changed since the claim: the resumer goes on from that read (here the thread
    no longer waits, so it is invalidated: proof that it went on)."""
    thread = FakeThread()
    db, seeded, resumer, _told = resumer_on(tmp_path, thread)
    claimed = _as_claimed(db, seeded)
    assert resumer.resume(seeded.request_id, claimed=claimed).run_failed == NOT_WAITING
    assert statuses(db, seeded)[0] == RequestStatus.INVALIDATED


def test_the_outcome_is_written_by_the_statement_that_locks_it_without_reading_it_again(tmp_path):
    """The resumer holds the request as its claim left it (its actions and decisions no longer
    change): its end is one conditional update, which takes the row's lock and returns where
    the card is, with no second read of the request, its actions and its decisions."""
    thread = FakeThread()  # no interrupt waiting: the request is closed, invalidated
    db, seeded, resumer, told = resumer_on(tmp_path, thread)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        request.card_channel, request.card_ts = "C1", "1.1"
    claimed = _as_claimed(db, seeded)
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    assert resumer.resume(seeded.request_id, claimed=claimed).run_failed == NOT_WAITING
    touching = [q.split()[0] for q in sent if "approval_requests" in q.split("WHERE")[0]]
    writes = [q for q in sent if q.startswith("UPDATE approval_requests SET status")]
    assert len(writes) == 1 and "RETURNING" in writes[0], writes
    # claim re-read, end, the run's other pending approvals locked (none), card shown
    assert touching == ["SELECT", "UPDATE", "SELECT", "UPDATE"], sent
    assert statuses(db, seeded) == (RequestStatus.INVALIDATED, RunStatus.FAILED)
    assert [c.status for c in told.cards] == [RequestStatus.INVALIDATED]


def test_the_card_shown_is_where_it_is_now_not_where_the_claim_read_it(tmp_path):
    """A card posted again after the claim was read (its first post lost) is the one shown."""
    thread = FakeThread()
    db, seeded, resumer, told = resumer_on(tmp_path, thread)
    claimed = _as_claimed(db, seeded)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        request.card_channel, request.card_ts = "C9", "9.9"
    resumer.resume(seeded.request_id, claimed=claimed)
    assert [(c.card_channel, c.card_ts, c.status) for c in told.cards] == [
        ("C9", "9.9", RequestStatus.INVALIDATED)
    ]


@dataclass
class CancelledMeanwhile(FakeThread):
    """The run is cancelled (its request closed) while the thread's checkpoint is read."""

    db: Any = None
    request_id: str = ""

    def state(self, thread_id: str) -> Any:
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(self.request_id)
            request.status = RequestStatus.CANCELLED
            request.run.status = RunStatus.CANCELLED
        return super().state(thread_id)


def test_a_cancel_committed_after_the_claim_read_stands_over_the_outcome(tmp_path):
    thread = CancelledMeanwhile()
    db, seeded, resumer, told = resumer_on(tmp_path, thread)
    thread.db, thread.request_id = db, seeded.request_id
    claimed = _as_claimed(db, seeded)
    assert resumer.resume(seeded.request_id, claimed=claimed) == NOTHING
    assert statuses(db, seeded) == (RequestStatus.CANCELLED, RunStatus.CANCELLED)
    assert told.cards == [] and told.results == [], "the cancel redraws its own cards"


def test_an_end_recorded_elsewhere_first_is_never_turned_into_a_cancel(tmp_path):
    """Our claim was taken over while we waited for the run's lock; the taker resumed it (the
    tool ran) and then the run was cancelled. Reading "cancelled run" late, we must not
    write "cancelled: nothing ran" over what ran, nor draw it on the card."""
    thread = FakeThread()
    db, seeded, resumer, told = resumer_on(tmp_path, thread)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        ApprovalRepository(s).finish(request, status=RequestStatus.RESOLVED, outcome="ran")
        request.card_channel, request.card_ts = "C1", "1.1"
        RunRepository(s).set_status(request.run, RunStatus.CANCELLED)
    assert resumer.resume(seeded.request_id) == NOTHING
    assert statuses(db, seeded) == (RequestStatus.RESOLVED, RunStatus.CANCELLED)
    assert told.cards == [], "whoever closed it drew its card"
    assert thread.invoked == []


def test_an_invalidated_card_is_drawn_with_the_run_it_failed(tmp_path):
    thread = FakeThread()
    db, seeded, resumer, told = resumer_on(tmp_path, thread, claimed_by="nobody")
    with db.transaction() as s:  # pending again, with a card: the policy changed meanwhile
        request = ApprovalRepository(s).get(seeded.request_id)
        request.status, request.claimed_by = RequestStatus.PENDING, None
        request.card_channel, request.card_ts = "C1", "1.1"
    resumer.invalidate(seeded.request_id, reason="the approval policy changed")
    with db.transaction() as s:
        fresh = approval_view(ApprovalRepository(s).get(seeded.request_id))
    assert told.cards == [fresh], "the card shows what a fresh read of the request shows"


def _ended_with_it_decided(db, seeded, outcome: ActionOutcome) -> None:  # type: ignore[no-untyped-def]
    """A sibling's resume completed the run while this request waited, claimed, decided."""
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        request.actions[0].outcome = outcome
        RunRepository(s).set_status(request.run, RunStatus.COMPLETED, result_text="done")


def test_a_rejection_delivered_before_its_run_ended_is_told_as_decided(tmp_path):
    """A process delivered the rejection and died; the run then completed. Its interrupt no
    longer waits: the rejection stands, neither denied nor invalidated."""
    thread = FakeThread()  # the interrupt no longer waits
    db, seeded, resumer, _told = resumer_on(tmp_path, thread)
    _ended_with_it_decided(db, seeded, ActionOutcome.REJECTED)
    assert resumer.resume(seeded.request_id, recovering=True) == NOTHING
    assert thread.invoked == []
    assert statuses(db, seeded) == (RequestStatus.RESOLVED, RunStatus.COMPLETED)


def test_an_approval_of_an_ended_run_is_closed_without_reading_its_thread(tmp_path):
    """Nothing of it was spent and no process died resuming it: whatever the thread says (a
    remote one may be unreachable), it is closed unresumed."""
    thread = FakeThread()
    db, seeded, resumer, _told = resumer_on(tmp_path, thread)
    _ended_with_it_decided(db, seeded, ActionOutcome.APPROVED)
    assert resumer.resume(seeded.request_id) == NOTHING
    assert (thread.read, thread.invoked) == (0, [])
    assert statuses(db, seeded) == (RequestStatus.INVALIDATED, RunStatus.COMPLETED)


def test_an_approval_delivered_but_never_spent_before_its_run_ended_says_it_did_not_run(
    tmp_path,
):
    """A process died between delivering the approval and the tool's call: the evidence
    says it did not run, never that it was resolved."""
    thread = FakeThread()
    db, seeded, resumer, _told = resumer_on(tmp_path, thread)
    _ended_with_it_decided(db, seeded, ActionOutcome.APPROVED)
    resumer.resume(seeded.request_id, recovering=True)
    assert thread.invoked == []
    assert statuses(db, seeded) == (RequestStatus.FAILED, RunStatus.COMPLETED)
