"""What an audit append costs in statements: the chain's turn, its head and the events' ids in
one row lock; on PostgreSQL the transaction's events and its head written in one statement at the
end; and the chain as intact as before."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.exc import OperationalError

from store.audit_chain import AuditChainError
from store.audit_models import AuditEvent, AuditHead
from store.audit_rows import ID_BLOCK
from store.db import Database
from store.repositories import AuditRepository, RunRepository
from store.statuses import RunStatus
from tests.agent_runtime.rows import seed_request
from tests.store.audit_env import KEY, append, check, open_store
from tests.store.test_audit_shards import (
    _wait_until_another_backend_waits_for_a_lock,
    runs_in_distinct_shards,
)


def _statements(db: Database) -> list[str]:
    """Every statement the store sends from now on (the list grows as they are sent)."""
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    return sent


def _kinds(sent: list[str]) -> list[str]:
    """Each statement by what it does to the audit log."""
    kinds = []
    for query in sent:
        if query.startswith("WITH") and "INSERT INTO audit_events" in query:
            kinds.append("insert events, write head")
        elif query.startswith("INSERT INTO audit_events"):
            kinds.append("insert events")
        elif query.startswith("UPDATE audit_head"):
            kinds.append("write head")
        elif "FROM audit_head" in query and "FOR UPDATE" in query:
            kinds.append("lock head")
        else:
            kinds.append(query.split()[0])
    return kinds


@pytest.mark.parametrize("events", [1, 2, 3, 9])
def test_a_transaction_appends_in_two_statements(pg_url: str, events: int) -> None:
    """Lock the head (the chain's turn, its current state and ids for the events at once),
    then insert the events and write the head in one statement, however many events the
    transaction records (more ids are taken, under the same lock, past the first few)."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    sent = _statements(db)
    with db.transaction() as s:
        recorded = [AuditRepository(s).record(f"e{n}", run_id=x) for n in range(events)]
    kinds = [k for k in _kinds(sent) if k != "SELECT"]  # ids past the first few
    assert kinds == ["lock head", "insert events, write head"]
    assert len(sent) == 2 + (events - 1) // ID_BLOCK
    ids = [e.id for e in recorded]
    assert ids == sorted(ids)  # the chain's order is its ids' order
    with db.transaction() as s:
        head = AuditRepository(s).head(recorded[0].shard)
        assert head is not None
        assert (head.event_count, head.last_event_id, head.last_hash) == (
            events,
            ids[-1],
            recorded[-1].hash,
        )
    report = check(db)
    assert report.intact and report.checked == events
    db.dispose()


def test_a_query_between_two_events_still_writes_the_head_once(store_url: str) -> None:
    """The query flushes the first event on its own; the head is still written once, at the
    end, with the second event as its newest."""
    db = open_store(store_url)
    append(db, "before")
    sent = _statements(db)
    with db.transaction() as s:
        AuditRepository(s).record("a")
        assert s.scalars(select(AuditEvent.kind).order_by(AuditEvent.id)).all() == ["before", "a"]
        second = AuditRepository(s).record("b")
    assert sum("write head" in kind for kind in _kinds(sent)) == 1
    with db.transaction() as s:
        head = AuditRepository(s).head(0)
        assert head is not None and (head.event_count, head.last_event_id) == (3, second.id)
    report = check(db)
    assert report.intact and report.checked == 3
    db.dispose()


def test_the_log_checks_out_inside_the_transaction_that_appends(store_url: str) -> None:
    """Reading the heads in the transaction that appends sees its events."""
    db = open_store(store_url)
    with db.transaction() as s:
        repo = AuditRepository(s)
        repo.record("a")
        repo.record("b")
        report = repo.verify()
        assert report.problem is None and report.checked == 2
        repo.record("c")
    report = check(db)
    assert report.intact and report.checked == 3
    db.dispose()


def test_seal_locks_every_head_in_one_statement(pg_url: str) -> None:
    unkeyed = open_store(pg_url, key=None)
    append(unkeyed, "a")
    kept = check(unkeyed)
    db = Database(pg_url, audit_key=KEY)
    sent = _statements(db)
    with db.transaction() as s:
        assert not AuditRepository(s).seal(events=1, last_hash=kept.last_hash).already
    assert _kinds(sent).count("lock head") == 1
    assert not [q for q in sent if "advisory" in q]
    assert check(db).intact
    db.dispose()
    unkeyed.dispose()


def test_seal_waits_for_an_append_and_an_append_for_seal(pg_url: str) -> None:
    unkeyed = open_store(pg_url, key=None)
    append(unkeyed, "a")
    kept = check(unkeyed)
    (x,) = runs_in_distinct_shards(1)
    db = Database(pg_url, audit_key=KEY)
    with unkeyed.transaction() as holder:
        AuditRepository(holder).record("appending", run_id=x)
        with pytest.raises(OperationalError, match="lock timeout"), db.transaction() as s:
            s.execute(text("SET LOCAL lock_timeout = '200ms'"))
            AuditRepository(s).seal(events=1, last_hash=kept.last_hash)
    kept = check(unkeyed)
    with db.transaction() as sealing:
        AuditRepository(sealing).seal(events=2, last_hash=kept.last_hash)
        with pytest.raises(OperationalError, match="lock timeout"), unkeyed.transaction() as s:
            s.execute(text("SET LOCAL lock_timeout = '200ms'"))
            AuditRepository(s).record("not while sealing")
    report = check(db)
    assert report.intact and report.checked == 2
    with db.transaction() as s:
        assert all(h.keyed_from is not None for h in s.scalars(select(AuditHead)))
    db.dispose()
    unkeyed.dispose()


def test_a_seal_waiting_for_an_append_sees_it_and_refuses(pg_url: str) -> None:
    """The seal reads the heads under their locks: an append that commits while it waits is
    in what it checks (so it is not the log vouched for), never keyed over with a stale MAC."""
    unkeyed = open_store(pg_url, key=None)
    append(unkeyed, "a")
    kept = check(unkeyed)
    (x,) = runs_in_distinct_shards(1)
    db = Database(pg_url, audit_key=KEY)
    outcome: list[BaseException | None] = []

    def seal() -> None:
        try:
            with db.transaction() as s:
                AuditRepository(s).seal(events=1, last_hash=kept.last_hash)
            outcome.append(None)
        except BaseException as exc:  # reported by the test, not lost in the thread
            outcome.append(exc)

    worker = threading.Thread(target=seal)
    with unkeyed.transaction() as holder:
        AuditRepository(holder).record("appended while the seal waits", run_id=x)
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
    worker.join(timeout=30)
    assert not worker.is_alive()
    (error,) = outcome
    assert isinstance(error, AuditChainError) and "not the log you vouch for" in str(error)
    report = check(unkeyed)
    assert report.problem is None and report.checked == 2
    db.dispose()
    unkeyed.dispose()


def test_a_head_written_in_a_savepoint_that_rolls_back_is_written_again(store_url: str) -> None:
    """A savepoint released inside another writes the head; the outer one rolling back undoes
    that write but not the event before it, so the head is written again at the end."""
    db = open_store(store_url)
    with db.transaction() as s:
        kept = AuditRepository(s).record("kept")
        with pytest.raises(RuntimeError), s.begin_nested():
            with s.begin_nested():
                pass
            raise RuntimeError("the outer savepoint rolls back")
    with db.transaction() as s:
        head = AuditRepository(s).head(0)
        assert head is not None and (head.event_count, head.last_event_id) == (1, kept.id)
    report = check(db)
    assert report.intact and report.checked == 1
    db.dispose()


def test_events_of_a_released_savepoint_and_after_it_link_up(store_url: str) -> None:
    db = open_store(store_url)
    sent = _statements(db)
    with db.transaction() as s:
        with s.begin_nested():
            AuditRepository(s).record("in the savepoint")
        AuditRepository(s).record("after it")
    assert _kinds(sent).count("lock head") == (0 if db.is_sqlite else 1)
    report = check(db)
    assert report.intact and report.checked == 2
    db.dispose()


def test_a_row_changed_before_an_append_is_written_before_the_head_is_locked(
    store_url: str,
) -> None:
    """Lock order everywhere: the rows a transaction changed (a run's status, say), then the
    audit chain's head. A row changed through the ORM is written when the head is locked, not
    at the commit: the transaction never holds the head while it waits for that row."""
    db = open_store(store_url)
    x = seed_request(db).run_id
    sent = _statements(db)
    with db.transaction() as s:
        run = RunRepository(s).get(x)
        assert run is not None
        RunRepository(s).set_status(run, RunStatus.FAILED, result_text="stopped")
        AuditRepository(s).record("run_failed", run_id=x)
        before_commit = list(sent)
    run_written = [i for i, q in enumerate(before_commit) if q.startswith("UPDATE runs")]
    head_read = [i for i, q in enumerate(before_commit) if "FROM audit_head" in q]
    assert run_written and head_read, before_commit
    assert run_written[0] < head_read[0], before_commit


def test_ids_are_taken_once_the_chain_is_held(pg_url: str) -> None:
    """An append that waits for its chain's other writer takes its events' ids only once that
    writer committed: the chain's order stays its ids' order, even when the first writer took
    more ids, under its lock, after the second began to wait."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    second: list[AuditEvent] = []

    def append_second() -> None:
        with db.transaction() as s:
            second.append(AuditRepository(s).record("second", run_id=x))

    worker = threading.Thread(target=append_second)
    with db.transaction() as s:
        first = [AuditRepository(s).record("first", run_id=x)]
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
        first += [AuditRepository(s).record(f"first {n}", run_id=x) for n in range(ID_BLOCK + 1)]
    worker.join(timeout=30)
    assert not worker.is_alive()
    (later,) = second
    assert later.id > max(e.id for e in first)
    report = check(db)
    assert report.intact and report.checked == ID_BLOCK + 3, report
    db.dispose()


def test_ids_go_past_the_32_bit_limit(pg_url: str) -> None:
    """Ids are taken a few at a time, so a busy log uses them up faster than it appends:
    they are 64-bit, and the chain holds past 2**31."""
    db = open_store(pg_url)
    with db.engine.begin() as conn:
        conn.execute(
            text("SELECT setval(pg_get_serial_sequence('audit_events', 'id'), :near)"),
            {"near": 2**31 - 2},
        )
    append(db, "a", "b", "c")
    with db.transaction() as s:
        assert min(e.id for e in AuditRepository(s).iter_all()) >= 2**31 - 1
    report = check(db)
    assert report.intact and report.checked == 3, report
    db.dispose()


def test_a_sequence_that_caches_ids_is_refused_at_start_up(pg_url: str) -> None:
    """With CACHE above 1 each connection hands out ids from a range of its own, so a chain's
    later writer may take smaller ids than its earlier one, and `audit verify` would report
    the log as altered: the bot refuses to start and says how to fix it."""
    db = open_store(pg_url)
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "DO $$ BEGIN EXECUTE format('ALTER SEQUENCE %s CACHE 20', "
                "pg_get_serial_sequence('audit_events', 'id')); END $$"
            )
        )
    with pytest.raises(AuditChainError, match="CACHE 1"), db.transaction() as s:
        AuditRepository(s).check_key()
    db.dispose()
