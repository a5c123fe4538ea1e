"""Loading a request: everything a decision reads in one round trip, and a lock on the
request's row alone."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.exc import OperationalError

from store.claim_repository import ClaimRepository
from store.db import Database
from store.migrate import upgrade
from store.models import Action, Run
from store.repositories import (
    ApprovalRepository,
    CardRepository,
    DecisionRepository,
)
from store.request_end import CardPlace, Closed
from store.statuses import RequestStatus
from tests.agent_runtime.rows import seed_request
from tests.store.test_audit_shards import _wait_until_another_backend_waits_for_a_lock
from tests.store.test_pending_slots import ALICE, RM, _request


@pytest.mark.parametrize("for_update", [False, True])
def test_a_request_comes_with_its_run_actions_and_decisions_in_one_load(
    store_url: str, for_update: bool
) -> None:
    db = Database(store_url)
    upgrade(db.engine)
    stored = _request(db, [RM], [RM])
    with db.transaction() as s:
        action = ApprovalRepository(s).get_action(stored.actions[0].id)
        assert action is not None
        DecisionRepository(s).add(
            action, reviewer_id="U0REL1", team_id=None, type_="approve", message=None
        )
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    with db.transaction() as s:
        request = ApprovalRepository(s).get(stored.id, for_update=for_update)
        assert request is not None
        shown = (
            request.run.requester_id,
            [a.position for a in request.actions],
            [len(a.decisions) for a in request.actions],
        )
    assert shown == (ALICE, [0, 1], [1, 0])
    # Locking takes a statement of its own (see the next test for why).
    assert len([q for q in sent if q.lstrip().upper().startswith("SELECT")]) == 1 + for_update
    db.dispose()


def test_locking_a_request_leaves_its_run_unlocked(pg_url: str) -> None:
    """The lock order is request, then audit chain; a run's row is never locked with it."""
    db = Database(pg_url)
    upgrade(db.engine)
    stored = _request(db, [RM])
    with db.transaction() as holder:
        assert ApprovalRepository(holder).get(stored.id, for_update=True) is not None
        with db.transaction() as other:
            other.execute(text("SET LOCAL lock_timeout = '200ms'"))
            run = select(Run).where(Run.id == stored.run_id).with_for_update(nowait=True)
            assert other.scalars(run).one().id == stored.run_id
            with pytest.raises(OperationalError, match="lock timeout"):
                ApprovalRepository(other).get(stored.id, for_update=True)
    db.dispose()


def test_a_request_locked_after_a_wait_shows_what_was_committed_during_it(pg_url: str) -> None:
    """The second of two deciders waits for the first's lock; once it holds it, it must see
    the decision the first committed, or both would decide the same action."""
    db = Database(pg_url)
    upgrade(db.engine)
    stored = _request(db, [RM])
    seen: list[int] = []
    failures: list[BaseException] = []

    def second() -> None:
        try:
            with db.transaction() as s:
                request = ApprovalRepository(s).get(stored.id, for_update=True)
                assert request is not None
                seen.append(len(request.actions[0].decisions))
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    worker = threading.Thread(target=second)
    with db.transaction() as first:
        request = ApprovalRepository(first).get(stored.id, for_update=True)
        assert request is not None and request.actions[0].decisions == []
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
        DecisionRepository(first).add(
            request.actions[0], reviewer_id="U0REL1", team_id=None, type_="approve", message=None
        )
    worker.join(timeout=30)
    assert not worker.is_alive() and not failures
    assert seen == [1]
    db.dispose()


def _resuming(db: Database) -> str:
    stored = _request(db, [RM])
    with db.transaction() as s:
        assert ClaimRepository(s).claim(stored.id, owner="me", lease=dt.timedelta(minutes=1))
    return stored.id


def _status(db: Database, request_id: str) -> str:
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        return request.status


@pytest.mark.parametrize("before", [RequestStatus.CANCELLED, RequestStatus.RESOLVED])
def test_only_a_resuming_request_is_closed(store_url: str, before: RequestStatus) -> None:
    """A cancel stands; so does an end another process recorded first (it took the claim over
    and resumed): a late closer never turns what ran into "cancelled", or the reverse."""
    db = Database(store_url)
    upgrade(db.engine)
    request_id = _resuming(db)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        ApprovalRepository(s).finish(request, status=before, outcome="first")
    with db.transaction() as s:
        closed = ApprovalRepository(s).close(
            request_id, status=RequestStatus.CANCELLED, outcome="late"
        )
    assert closed is None
    assert _status(db, request_id) == before
    db.dispose()


def test_closing_waits_for_a_cancel_under_way_and_the_cancel_stands(pg_url: str) -> None:
    """The close's update waits for the row a cancel holds, then sees the cancel."""
    db = Database(pg_url)
    upgrade(db.engine)
    request_id = _resuming(db)
    closed: list[object] = []
    failures: list[BaseException] = []

    def late_close() -> None:
        try:
            with db.transaction() as s:
                closed.append(
                    ApprovalRepository(s).close(
                        request_id, status=RequestStatus.RESOLVED, outcome="done"
                    )
                )
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    worker = threading.Thread(target=late_close)
    with db.transaction() as cancel:
        request = ApprovalRepository(cancel).get(request_id, for_update=True)
        assert request is not None
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
        ApprovalRepository(cancel).finish(request, status=RequestStatus.CANCELLED, outcome="x")
    worker.join(timeout=30)
    assert not worker.is_alive() and not failures
    assert closed == [None]
    assert _status(db, request_id) == RequestStatus.CANCELLED
    db.dispose()


def test_closing_returns_where_the_card_was_stored_while_it_waited(pg_url: str) -> None:
    db = Database(pg_url)
    upgrade(db.engine)
    request_id = _resuming(db)
    closed: list[Closed | None] = []
    worker = threading.Thread(
        target=lambda: closed.append(_close(db, request_id)),
    )
    with db.transaction() as adopting:
        request = ApprovalRepository(adopting).get(request_id, for_update=True)
        assert request is not None
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
        CardRepository(adopting).adopt_card(request, channel="C7", ts="7.7", shows="pending")
    worker.join(timeout=30)
    assert closed == [Closed(CardPlace(channel="C7", ts="7.7"))]
    assert _status(db, request_id) == RequestStatus.RESOLVED
    db.dispose()


def _close(db: Database, request_id: str) -> Closed | None:
    with db.transaction() as s:
        return ApprovalRepository(s).close(request_id, status=RequestStatus.RESOLVED, outcome="ok")


def test_a_decision_added_to_an_action_not_yet_loaded_with_its_decisions_is_there_once(
    store_url: str,
) -> None:
    """The row is written at once; an action whose decisions were never loaded reads them
    when asked, and finds the new one a single time."""
    db = Database(store_url)
    upgrade(db.engine)
    seeded = seed_request(db)
    with db.transaction() as s:
        action = s.get(Action, seeded.action_id)
        assert action is not None
        added = DecisionRepository(s).add(
            action, reviewer_id="U0REL1", team_id="T1", type_="approve", message=None
        )
        assert [d.id for d in action.decisions] == [added.id]
    with db.transaction() as s:
        action = s.get(Action, seeded.action_id)
        assert action is not None
        assert [d.id for d in action.decisions] == [added.id]
    db.dispose()
