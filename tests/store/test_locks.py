"""Per-thread locks: ``try_hold`` never waits, and never gets a lock someone else holds,
whether that is another thread or another process (SQLite file lock, PostgreSQL advisory lock)."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading

import pytest
from sqlalchemy import event, text

from store.db import Database
from store.locks import ThreadLocks
from tests.held import held_by_another_thread


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'locks.db'}"
    return request.getfixturevalue("pg_url")


def test_try_hold_gives_way_to_a_holder_in_another_thread(url):
    db = Database(url)
    locks = ThreadLocks(db)
    with held_by_another_thread(locks, "run_1"):
        with locks.try_hold("run_1") as got:
            assert got is False
        with locks.try_hold("run_2") as other:
            assert other is True  # other keys are free
    with locks.try_hold("run_1") as got:
        assert got is True
    db.dispose()


def _hold_in_a_process(url: str, held, done) -> None:  # type: ignore[no-untyped-def]
    db = Database(url)
    with ThreadLocks(db).hold("run_1"):
        held.set()
        done.wait(30)
    db.dispose()


def test_try_hold_gives_way_to_a_holder_in_another_process(url):
    ctx = multiprocessing.get_context("spawn")
    held, done = ctx.Event(), ctx.Event()
    process = ctx.Process(target=_hold_in_a_process, args=(url, held, done))
    process.start()
    db = Database(url)
    try:
        assert held.wait(60)
        with ThreadLocks(db).try_hold("run_1") as got:
            assert got is False
    finally:
        done.set()
        process.join(60)
    with ThreadLocks(db).try_hold("run_1") as got:
        assert got is True
    db.dispose()


def test_hold_within_waits_for_a_holder_that_lets_go_and_gives_up_on_one_that_does_not(url):
    db = Database(url)
    locks = ThreadLocks(db)
    with held_by_another_thread(locks, "run_1") as done:
        with locks.hold_within("run_1", 0.3) as got:
            assert got is False  # still held when the wait ran out
        with locks.hold_within("run_2", 0.3) as other:
            assert other is True
        threading.Timer(0.2, done.set).start()  # the holder lets go while we wait
        with locks.hold_within("run_1", 30) as got:
            assert got is True
            with locks.try_hold("run_1") as again:
                assert again is False  # and we hold it now
    with locks.hold("run_1"):  # released after hold_within
        pass
    db.dispose()


def test_try_keep_keeps_nothing_of_a_lock_another_process_holds(url):
    """On SQLite the in-process half of the lock is free when another process holds the file
    lock: a try that failed must not keep it, or this thread's own ``hold`` of the key would
    wait for itself once the other process let go. A lock that was free is kept until the
    stack closes."""
    ctx = multiprocessing.get_context("spawn")
    held, done = ctx.Event(), ctx.Event()
    process = ctx.Process(target=_hold_in_a_process, args=(url, held, done))
    process.start()
    db = Database(url)
    locks = ThreadLocks(db)
    try:
        assert held.wait(60)
        with contextlib.ExitStack() as stack:
            assert locks.try_keep("run_1", into=stack) is False
            done.set()
            process.join(60)
            with locks.try_hold("run_1") as now:
                assert now is True, "the failed try kept part of the lock"
    finally:
        done.set()
        process.join(60)
    with contextlib.ExitStack() as stack:
        assert locks.try_keep("run_1", into=stack) is True
        with ThreadLocks(db).try_hold("run_1") as elsewhere:
            assert elsewhere is False, "kept while the stack is open"
    with ThreadLocks(db).try_hold("run_1") as free_again:
        assert free_again is True
    db.dispose()


def test_on_postgresql_a_lock_needs_no_connection_of_the_transactions_pool(pg_url):
    """A decision tries its run's lock while it holds its request's row lock: with every
    pooled connection taken by transactions, the try must not wait for one of them (others
    would queue on that row meanwhile). And a lock held through a whole resume keeps no
    connection from the transactions."""
    db = Database(pg_url, pool_size=1)
    locks = ThreadLocks(db)
    taken = [db.engine.connect() for _ in range(2)]  # the pool's one, and its one overflow
    try:
        with contextlib.ExitStack() as stack:
            assert locks.try_keep("run_1", into=stack) is True
            assert db.lock_engine.pool.checkedout() == 1
            with ThreadLocks(db).try_hold("run_1") as again:
                assert again is False, "held by the kept lock"
        with locks.try_hold("run_1") as free_again:
            assert free_again is True
    finally:
        for conn in taken:
            conn.close()
        db.dispose()


def test_on_postgresql_threads_waiting_for_one_lock_take_no_connection_each(pg_url):
    """Threads of one process that want a run's lock its other thread holds wait in the
    process, not each on a connection of its own: a burst of clicks on one busy run opens no
    connection per click."""
    db = Database(pg_url)
    locks = ThreadLocks(db)
    checkouts: list[str] = []
    event.listen(db.lock_engine, "checkout", lambda *_args: checkouts.append("out"))
    answers: list[bool] = []
    try:
        with locks.hold("run_1"):
            waiters = [
                threading.Thread(target=_wait_briefly, args=(locks, "run_1", answers))
                for _ in range(5)
            ]
            for waiter in waiters:
                waiter.start()
            for waiter in waiters:
                waiter.join(60)
            with locks.try_hold("run_1") as busy:
                assert busy is False
        assert answers == [False] * 5
        assert checkouts == ["out"], "a waiter took a connection to wait on"
        with locks.hold_within("run_1", 5.0) as free:
            assert free is True
    finally:
        db.dispose()


def _wait_briefly(locks: ThreadLocks, key: str, answers: list[bool]) -> None:
    with locks.hold_within(key, 0.2) as held:
        answers.append(held)


def test_on_postgresql_a_lock_whose_release_failed_is_not_left_held(pg_url, monkeypatch):
    """The unlock fails (the connection broke, say): that connection must not go back to the
    pool still holding the lock, for the run would stay locked (and the next of this process
    to be handed that connection would be let in). Nor does the failure undo the work done
    under the lock: the connection thrown away, the server lets go of the lock."""
    db, elsewhere = Database(pg_url), Database(pg_url)
    try:
        monkeypatch.setattr("store.locks._LET_GO", text("SELECT no_such_unlock(:k)"))
        with ThreadLocks(db).hold("run_1"):
            pass
        monkeypatch.undo()
        # The server ends the thrown-away session a moment later: wait for the lock, briefly.
        with ThreadLocks(elsewhere).hold_within("run_1", 10.0) as free:
            assert free is True, "the lock was left held"
    finally:
        db.dispose()
        elsewhere.dispose()


def test_a_try_that_failed_holds_nothing_while_its_caller_goes_on(url):
    """Another process held the lock: while the caller answers "busy" (a cancel's refusal,
    say), this process's part of the lock is free for its other threads."""
    db, other_db = Database(url), Database(url)
    locks, other = ThreadLocks(db), ThreadLocks(other_db)
    try:
        with contextlib.ExitStack() as other_holds:
            other_holds.enter_context(other.hold("run_1"))
            with locks.try_hold("run_1") as got:
                assert got is False
                other_holds.close()  # the other process lets go meanwhile
                answers: list[bool] = []
                meanwhile = threading.Thread(target=lambda: answers.append(_tried(locks)))
                meanwhile.start()
                meanwhile.join(60)
                assert answers == [True], "the failed try kept this process's part"
    finally:
        db.dispose()
        other_db.dispose()


def _tried(locks: ThreadLocks) -> bool:
    with locks.try_hold("run_1") as got:
        return got


def test_on_postgresql_the_lock_taken_next_gets_the_connection_handed_back_last(pg_url):
    """A connection idle for a while is checked before it is handed out (a round trip); the
    one just handed back is not. The locks' connections go out last in, first out, so a
    click's lock try gets one that was just used, not the one idle the longest."""
    db = Database(pg_url)
    try:
        first, second = db.lock_engine.connect(), db.lock_engine.connect()
        pids = [c.execute(text("SELECT pg_backend_pid()")).scalar() for c in (first, second)]
        first.close()
        second.close()  # handed back last
        with db.lock_engine.connect() as next_one:
            assert next_one.execute(text("SELECT pg_backend_pid()")).scalar() == pids[1]
    finally:
        db.dispose()
