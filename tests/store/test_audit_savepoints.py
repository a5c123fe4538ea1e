"""Audit appends across savepoints: the chain verifies after each shape, and a savepoint
released inside a transaction that rolls back counts nothing as committed."""

from __future__ import annotations

import logging

import pytest

from store.repositories import AuditRepository
from tests.store.audit_env import check, open_store
from tests.store.savepoints import UNDOINGS, undone


class Boom(RuntimeError):
    pass


def test_inner_release_writes_head_then_outer_rolls_back_with_events(store_url: str) -> None:
    db = open_store(store_url)
    with db.transaction() as s:
        AuditRepository(s).record("a", run_id="r1")
        with pytest.raises(Boom), s.begin_nested():
            AuditRepository(s).record("b", run_id="r1")
            with s.begin_nested():
                AuditRepository(s).record("c", run_id="r1")
            AuditRepository(s).record("d", run_id="r1")
            raise Boom
        AuditRepository(s).record("e", run_id="r1")
    report = check(db)
    assert report.intact and report.checked == 2, report
    db.dispose()


def test_stale_tip_relocked_and_read_mid_transaction(store_url: str) -> None:
    db = open_store(store_url)
    with db.transaction() as s:
        with pytest.raises(Boom), s.begin_nested():
            AuditRepository(s).record("x", run_id="r2")
            AuditRepository(s).head(0)
            raise Boom
        AuditRepository(s).record("y", run_id="r2")
        AuditRepository(s).for_run("r2")
        with pytest.raises(Boom), s.begin_nested():
            AuditRepository(s).record("z", run_id="r2")
            AuditRepository(s).verify()
            raise Boom
    with db.transaction() as s:
        AuditRepository(s).record("w", run_id="r2")
    report = check(db)
    assert report.intact and report.checked == 2, report
    db.dispose()


def test_a_savepoint_release_does_not_count_events_its_parent_rolls_back(store_url: str) -> None:
    """``after_commit`` also fires when a savepoint is released: the event is not committed
    until the transaction is. Counted then, the high-water mark would claim an event the
    rollback removed, and every later append to the shard would be refused as a log restored
    from an older copy."""
    db = open_store(store_url)
    with db.transaction() as s, pytest.raises(Boom), s.begin_nested():
        with s.begin_nested():
            AuditRepository(s).record("x", run_id="r3")
        raise Boom
    with db.transaction() as s:
        AuditRepository(s).record("next, in a new transaction", run_id="r3")
    report = check(db)
    assert report.intact and report.checked == 1, report
    db.dispose()


def test_an_event_a_rolled_back_savepoint_wrote_is_written_again(store_url: str) -> None:
    """An event recorded before a savepoint, and written inside it so that a query there sees
    it, is not undone with the savepoint: the commit writes it again."""
    db = open_store(store_url)
    with db.transaction() as s:
        AuditRepository(s).record("before the savepoint", run_id="r4")
        with pytest.raises(Boom), s.begin_nested():
            assert [e.kind for e in AuditRepository(s).for_run("r4")] == ["before the savepoint"]
            raise Boom
    with db.transaction() as s:
        assert [e.kind for e in AuditRepository(s).for_run("r4")] == ["before the savepoint"]
    report = check(db)
    assert report.intact and report.checked == 1, report
    db.dispose()


@pytest.mark.parametrize("how", UNDOINGS)
def test_a_savepoint_undone_takes_its_events_with_it(store_url: str, how: str) -> None:
    """However SQLAlchemy says the savepoint was undone (a failed flush announces only its own
    rollback, ``close()`` none): the events written in it are written again, those recorded
    in it are gone, and the head counts what is left."""
    db = open_store(store_url)
    with db.transaction() as s:
        AuditRepository(s).record("kept", run_id="r5")

        def append() -> None:
            AuditRepository(s).record("undone", run_id="r5")
            AuditRepository(s).for_run("r5")  # both written, in the savepoint

        undone(s, how, append)
    with db.transaction() as s:
        assert [e.kind for e in AuditRepository(s).for_run("r5")] == ["kept"]
    report = check(db)
    assert report.intact and report.checked == 1, report
    db.dispose()


def test_events_in_a_savepoint_left_open_are_committed_counted_and_logged(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The commit releases the savepoint after its own hook ran: the events still count as
    the transaction's, in the log and in the high-water mark."""
    db = open_store(store_url)
    caplog.set_level(logging.INFO, logger="store.audit_log")
    with db.transaction() as s:
        s.begin_nested()
        AuditRepository(s).record("in an open savepoint", run_id="r7")
    assert "audit in an open savepoint (info)" in caplog.messages
    report = check(db)
    assert report.intact and report.checked == 1, report
    db.dispose()
