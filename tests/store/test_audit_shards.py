"""The audit log in shards: appends for different runs do not take turns, appends for one run
still do, and every chain is checked as the single chain was."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event, select, text, update
from sqlalchemy.exc import OperationalError

from store.audit_chain import AuditRollbackError, Expected
from store.audit_log import shard_of
from store.audit_models import AUDIT_SHARDS, AuditEvent, AuditHead
from store.db import Database
from store.repositories import AuditRepository
from tests.store.audit_env import append, behind_the_triggers, check, open_store


def runs_in_distinct_shards(count: int) -> list[str]:
    """Run ids whose events go to ``count`` different shards, none of them shard 0."""
    found: dict[int, str] = {}
    for n in range(1000):
        run = f"run-{n}"
        found.setdefault(shard_of(run, None), run)
    runs = [run for shard, run in sorted(found.items()) if shard != 0]
    assert len(runs) >= count
    return runs[:count]


def append_for(db: Database, run: str, *kinds: str) -> None:
    for kind in kinds:
        with db.transaction() as s:
            AuditRepository(s).record(kind, run_id=run, request_id=f"{run}-req")


def test_appends_for_different_runs_do_not_wait_for_each_other(pg_url: str) -> None:
    db = open_store(pg_url)
    x, y = runs_in_distinct_shards(2)
    with db.transaction() as holder:  # transaction A appends for run X and stays open
        AuditRepository(holder).record("decision_recorded", run_id=x)
        with db.transaction() as other:  # B, for run Y, must not wait for A
            other.execute(text("SET LOCAL lock_timeout = '2s'"))
            AuditRepository(other).record("decision_recorded", run_id=y)
        with pytest.raises(OperationalError, match="lock timeout"), db.transaction() as same:
            same.execute(text("SET LOCAL lock_timeout = '200ms'"))  # C, run X again: waits
            AuditRepository(same).record("decision_recorded", run_id=x)
    append_for(db, x, "after")  # once A committed, run X's chain takes the next append
    report = check(db)
    assert report.intact and report.checked == 3
    db.dispose()


def _wait_until_another_backend_waits_for_a_lock(db: Database) -> None:
    """Returns once some other connection is blocked on a lock (polls; fails after 10s)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
    )
    deadline = time.monotonic() + 10
    with db.engine.connect() as conn:
        while not conn.execute(query).scalar_one():
            assert time.monotonic() < deadline, "the second append never waited"
            conn.rollback()


def test_appends_for_one_run_take_turns_and_link_up(pg_url: str) -> None:
    """The second append waits for the first to commit, then links to it."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    failures: list[BaseException] = []

    def second() -> None:
        try:
            append_for(db, x, "second")
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    worker = threading.Thread(target=second)
    with db.transaction() as holder:
        AuditRepository(holder).record("first", run_id=x)
        worker.start()
        _wait_until_another_backend_waits_for_a_lock(db)
    worker.join(timeout=30)
    assert not worker.is_alive() and not failures
    report = check(db)
    assert report.problem is None and report.checked == 2
    db.dispose()


def test_one_transaction_keeps_to_one_chain(pg_url: str) -> None:
    """A transaction appending for two runs holds one chain's turn, never two (no deadlock)."""
    db = open_store(pg_url)
    x, y = runs_in_distinct_shards(2)
    with db.transaction() as s:
        first = AuditRepository(s).record("a", run_id=x)
        second = AuditRepository(s).record("b", run_id=y)
        assert second.shard == first.shard == shard_of(x, None)
    with db.transaction() as s:
        assert AuditRepository(s).record("c", run_id=y).shard == shard_of(y, None)
    assert check(db).intact
    db.dispose()


def _spread(db: Database) -> tuple[str, str]:
    x, y = runs_in_distinct_shards(2)
    append_for(db, x, "a", "b", "c")
    append_for(db, y, "d", "e")
    append(db, "f")  # no run: shard 0
    return x, y


def _ids(db: Database, run: str) -> list[int]:
    with db.transaction() as s:
        return [event.id for event in AuditRepository(s).for_run(run)]


def test_each_chain_names_what_was_removed_or_altered(store_url: str) -> None:
    db = open_store(store_url)
    x, _y = _spread(db)
    report = check(db)
    assert report.intact and report.checked == 6
    count, _fp, counts = report.fingerprint.split(":")
    assert count == "6" and sum(map(int, counts.split(","))) == 6
    shard_x, (_first, middle, after) = shard_of(x, None), _ids(db, x)[:3]
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id = {middle}")
    assert check(db).problem == (
        f"shard {shard_x}: event {after} (#2): its link to the previous event does not "
        "match (an event before it was removed, inserted or altered)"
    )
    db.dispose()


def test_a_removed_tail_or_head_of_one_chain_shows(store_url: str) -> None:
    db = open_store(store_url)
    x, y = _spread(db)
    shard_y, newest = shard_of(y, None), _ids(db, y)[-1]
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id = {newest}")
    assert (check(db).problem or "").startswith(
        f"shard {shard_y}: the newest 1 event(s) are missing"
    )
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_head WHERE id = {shard_y}")
    assert check(db).problem == (
        f"shard {shard_y}: the head that anchors the log is missing (its row was removed)"
    )
    append_for(db, x, "x still appends")  # other chains carry on
    with pytest.raises(Exception, match="head that anchors the log is missing"):
        append_for(db, y, "not on a chain without its head")
    db.dispose()


def test_an_altered_event_in_another_chain_is_named(store_url: str) -> None:
    db = open_store(store_url)
    x, _y = _spread(db)
    target = _ids(db, x)[0]
    with behind_the_triggers(db) as conn:
        conn.execute(update(AuditEvent).where(AuditEvent.id == target).values(actor_id="U2"))
    assert check(db).problem == (
        f"shard {shard_of(x, None)}: event {target} (#1) was altered: its content does not "
        "match its MAC"
    )
    db.dispose()


def test_moving_an_event_to_another_chain_shows(store_url: str) -> None:
    db = open_store(store_url)
    x, y = _spread(db)
    newest = _ids(db, y)[-1]
    with behind_the_triggers(db) as conn:
        conn.execute(
            update(AuditEvent).where(AuditEvent.id == newest).values(shard=shard_of(x, None))
        )
    assert "its link to the previous event does not match" in (check(db).problem or "")
    db.dispose()


def test_swapping_two_chains_with_their_heads_shows(store_url: str) -> None:
    """Each head's MAC names its shard: whole chains cannot trade places."""
    db = open_store(store_url)
    x, y = _spread(db)
    a, b = shard_of(x, None), shard_of(y, None)
    with behind_the_triggers(db) as conn:
        rows = {
            row["id"]: dict(row)
            for row in conn.execute(select(AuditHead.__table__)).mappings()
            if row["id"] in (a, b)
        }
        for shard, other in ((a, b), (b, a)):
            values = {k: v for k, v in rows[other].items() if k != "id"}
            conn.execute(update(AuditHead).where(AuditHead.id == shard).values(**values))
        conn.execute(update(AuditEvent).where(AuditEvent.shard == a).values(shard=-1))
        conn.execute(update(AuditEvent).where(AuditEvent.shard == b).values(shard=a))
        conn.execute(update(AuditEvent).where(AuditEvent.shard == -1).values(shard=b))
    assert "does not match AUDIT_KEY" in (check(db).problem or "")
    db.dispose()


def test_a_restored_older_head_of_one_chain_is_caught(store_url: str) -> None:
    db = open_store(store_url)
    x, _y = _spread(db)
    shard_x = shard_of(x, None)
    with db.engine.connect() as conn:
        copy = dict(
            conn.execute(select(AuditHead.__table__).where(AuditHead.id == shard_x))
            .mappings()
            .one()
        )
    append_for(db, x, "g")
    kept = check(db).fingerprint
    with db.transaction() as s:
        assert AuditRepository(s).verify(expect=Expected.parse(kept)).problem is None
    newest = _ids(db, x)[-1]
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id = {newest}")
        conn.execute(update(AuditHead).where(AuditHead.id == shard_x).values(**copy))
    assert check(db).intact  # every MAC holds: only something kept outside can tell
    with db.transaction() as s:
        problem = AuditRepository(s).verify(expect=Expected.parse(kept)).problem
    assert problem == (
        f"the log has 6 events but had at least 7 when {kept} was printed: "
        "newer events were removed"
    )
    with pytest.raises(AuditRollbackError, match=f"shard {shard_x}: the head records 3 events"):
        append_for(db, x, "h")  # this process saw 4 in that chain
    db.dispose()


def test_expect_names_the_chain_that_lost_events(store_url: str) -> None:
    db = open_store(store_url)
    _x, y = _spread(db)
    kept = Expected.parse(check(db).fingerprint)
    counts = list(kept.counts)
    shard_y = shard_of(y, None)
    counts[shard_y] += 1
    counts[0] -= 1  # as many events, but one more in y's chain than it has
    moved = Expected(kept.count, kept.fingerprint, tuple(counts))
    with db.transaction() as s:
        problem = AuditRepository(s).verify(expect=moved).problem or ""
    assert problem.startswith(f"shard {shard_y}: the chain has 2 events but had 3 when ")
    assert len(kept.counts) == AUDIT_SHARDS
    db.dispose()


def _statements(db: Database) -> list[str]:
    """Every statement the store sends from now on (the list grows as they are sent)."""
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    return sent


def test_a_transaction_takes_its_chains_turn_and_reads_its_head_once(pg_url: str) -> None:
    """Several events in one transaction: one head read, locking it, and the events still
    link up one after the other."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    sent = _statements(db)
    with db.transaction() as s:
        events = [AuditRepository(s).record(kind, run_id=x) for kind in ("a", "b", "c")]
    assert sum("FROM audit_head" in q for q in sent) == 1
    assert sum("FROM audit_head" in q and "FOR UPDATE" in q for q in sent) == 1
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:2]]
    report = check(db)
    assert report.intact and report.checked == 3
    db.dispose()


def test_a_turn_taken_in_a_rolled_back_savepoint_is_taken_again(pg_url: str) -> None:
    """A savepoint that rolls back ends the turn taken inside it: the next event of the
    transaction takes it again and links to the head as it was before the savepoint."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    append_for(db, x, "before")
    sent = _statements(db)
    with db.transaction() as s:
        with pytest.raises(RuntimeError), s.begin_nested():
            AuditRepository(s).record("undone", run_id=x)
            raise RuntimeError("the savepoint rolls back")
        AuditRepository(s).record("kept", run_id=x)
    assert sum("FROM audit_head" in q and "FOR UPDATE" in q for q in sent) == 2
    report = check(db)
    assert report.intact and report.checked == 2
    db.dispose()


def test_cached_head_then_rolled_back_savepoint_then_more_events_links_up(pg_url: str) -> None:
    """The head cached by the outer transaction, extended in a savepoint that rolls back, then
    extended again: the chain must link to the head as it was before the savepoint."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    with db.transaction() as s:
        AuditRepository(s).record("outer-1", run_id=x)
        with pytest.raises(RuntimeError), s.begin_nested():
            AuditRepository(s).record("undone", run_id=x)
            raise RuntimeError("the savepoint rolls back")
        AuditRepository(s).record("outer-2", run_id=x)
    report = check(db)
    assert report.intact and report.checked == 2, report.problem
    db.dispose()


def test_an_event_rolled_back_with_its_savepoint_does_not_raise_the_high_water(
    pg_url: str,
) -> None:
    """An event appended in a savepoint that rolls back was never committed: the process must
    not remember its count as seen, or the next append refuses the (intact) head as "restored
    from an older copy" and every later audited operation on that chain fails."""
    db = open_store(pg_url)
    (x,) = runs_in_distinct_shards(1)
    with db.transaction() as s:
        AuditRepository(s).record("kept", run_id=x)
        with pytest.raises(RuntimeError), s.begin_nested():
            AuditRepository(s).record("undone", run_id=x)
            raise RuntimeError("the savepoint rolls back")
    assert check(db).intact
    append_for(db, x, "next")  # raises AuditRollbackError today
    report = check(db)
    assert report.intact and report.checked == 2
    db.dispose()
