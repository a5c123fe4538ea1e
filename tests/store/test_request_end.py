"""A claimed request's end, and its run's when the resume ended the run: on PostgreSQL one
statement writes both, taking the request's row lock before the run's (the lock order of every
transaction: request rows, then the run's row, then the audit chain)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError

from store.db import Database
from store.migrate import upgrade
from store.models import ApprovalRequest, Run
from store.repositories import ApprovalRepository, RunRepository
from store.request_end import CardPlace, Closed
from store.statuses import RequestStatus, RunStatus
from tests.store.test_audit_shards import _wait_until_another_backend_waits_for_a_lock
from tests.store.test_repositories import _resuming, _status

DONE = (RunStatus.COMPLETED, "all done")


def _resuming_in(url: str) -> tuple[Database, str]:
    """A store at the newest revision with one request being resumed."""
    db = Database(url)
    upgrade(db.engine)
    return db, _resuming(db)


class Closing(threading.Thread):
    """Closes the request, with its run's end, on a thread of its own (it may wait for a lock);
    ``closed`` and ``failures`` once joined."""

    def __init__(self, db: Database, request_id: str) -> None:
        super().__init__()
        self.db, self.request_id = db, request_id
        self.closed: list[Closed | None] = []
        self.failures: list[BaseException] = []

    def run(self) -> None:
        try:
            self.closed.append(_close(self.db, self.request_id))
        except BaseException as exc:  # reported by the test
            self.failures.append(exc)

    def result(self) -> Closed | None:
        self.join(timeout=30)
        assert not self.is_alive() and not self.failures
        return self.closed[0]


def _close(db: Database, request_id: str) -> Closed | None:
    with db.transaction() as s:
        return ApprovalRepository(s).close(
            request_id, status=RequestStatus.RESOLVED, outcome="ok", run_end=DONE
        )


def _run_of(db: Database, request_id: str) -> tuple[str, str | None]:
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        return request.run.status, request.run.result_text


def test_a_close_with_its_runs_end_writes_both_and_returns_the_run_as_ended(
    store_url: str,
) -> None:
    db, request_id = _resuming_in(store_url)
    closed = _close(db, request_id)
    assert closed is not None and closed.card == CardPlace(channel=None, ts=None)
    assert closed.run is not None
    assert (closed.run.status, closed.run.result_text) == DONE
    assert closed.others == ()
    assert _status(db, request_id) == RequestStatus.RESOLVED
    assert _run_of(db, request_id) == DONE
    db.dispose()


def test_a_run_that_ended_before_keeps_its_end_and_the_request_is_closed(store_url: str) -> None:
    """A cancel of the run stands: the close writes the request's end, not the run's."""
    db, request_id = _resuming_in(store_url)
    with db.transaction() as s:
        run_id = ApprovalRepository(s).run_id_of(request_id)
        assert run_id is not None
        ended = RunRepository(s).finish(run_id, status=RunStatus.CANCELLED, result_text="stop")
        assert ended is not None
    closed = _close(db, request_id)
    assert closed is not None and closed.run is None
    assert _status(db, request_id) == RequestStatus.RESOLVED
    assert _run_of(db, request_id) == (RunStatus.CANCELLED, "stop")
    db.dispose()


def test_a_request_closed_first_by_another_leaves_its_run_as_it_was(store_url: str) -> None:
    db, request_id = _resuming_in(store_url)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        ApprovalRepository(s).finish(request, status=RequestStatus.CANCELLED, outcome="first")
    assert _close(db, request_id) is None
    assert _run_of(db, request_id)[0] == RunStatus.RUNNING
    db.dispose()


def test_on_postgresql_the_close_locks_the_request_before_the_run(pg_url: str) -> None:
    """While the close waits for the run's row, the request's row is already its own: it took
    that lock first, as every transaction does (the other order could deadlock with a cancel)."""
    db, request_id = _resuming_in(pg_url)
    worker = Closing(db, request_id)
    with db.transaction() as holder:
        run_id = ApprovalRepository(holder).run_id_of(request_id)
        holder.scalars(select(Run).where(Run.id == run_id).with_for_update()).one()
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
        with db.transaction() as other:
            other.execute(text("SET LOCAL lock_timeout = '200ms'"))
            mine = select(ApprovalRequest.id).where(ApprovalRequest.id == request_id)
            with pytest.raises(OperationalError, match="lock timeout"):
                other.execute(mine.with_for_update())
    closed = worker.result()
    assert closed is not None and closed.run is not None
    assert _run_of(db, request_id) == DONE
    db.dispose()


def test_on_postgresql_a_cancel_that_ends_the_run_while_the_close_waits_stands(
    pg_url: str,
) -> None:
    """The run's row, held by a cancel that ends the run and commits: the close, which waited
    for it, finds the run ended (its update's condition checked again on the row as
    committed), keeps that end, and still closes its request."""
    db, request_id = _resuming_in(pg_url)
    worker = Closing(db, request_id)
    with db.transaction() as cancel:
        run_id = ApprovalRepository(cancel).run_id_of(request_id)
        assert run_id is not None
        cancel.scalars(select(Run).where(Run.id == run_id).with_for_update()).one()
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
        assert RunRepository(cancel).finish(run_id, status=RunStatus.CANCELLED, result_text="x")
    closed = worker.result()
    assert closed is not None and closed.run is None
    assert _status(db, request_id) == RequestStatus.RESOLVED
    assert _run_of(db, request_id) == (RunStatus.CANCELLED, "x")
    db.dispose()
