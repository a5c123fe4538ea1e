"""A run whose agent is at work is never taken for stalled by another process, even when the
lock it works under is lost: on PostgreSQL the lock lives on a connection of its own, and the
server frees it if that connection drops (a restart of a proxy, a terminated backend) while
the agent goes on. Its row is kept touched meanwhile, and maintenance counts from it."""

from __future__ import annotations

import datetime as dt
import threading

import sqlalchemy as sa

from agent_runtime.graph_runtime import close_checkpointer
from store.models import Run, utcnow
from tests.agent_runtime import custom_graphs
from tests.agent_runtime.engine_env import REQUESTER, Clock, make_env
from tests.agent_runtime.test_recovery import another_replica

LEASE = dt.timedelta(seconds=1.5)  # kept touched every half second
WAIT = 30.0


def _lock_backends(url: str) -> list[int]:
    """The server processes holding advisory locks (the run's, here)."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT pid FROM pg_locks WHERE locktype = 'advisory'"))
            return [int(pid) for (pid,) in rows]
    finally:
        engine.dispose()


def _drop_connections(url: str, pids: list[int]) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            for pid in pids:
                conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    finally:
        engine.dispose()


def test_a_run_at_work_whose_lock_was_lost_is_not_taken_for_stalled(tmp_path, migrated_pg_url):
    clock = Clock()
    agent = "tests.agent_runtime.custom_graphs:held_first_step"
    env = make_env(tmp_path, agent, url=migrated_pg_url, clock=clock, lease=LEASE)
    other = another_replica(env, clock)
    custom_graphs.WORKING.clear()
    custom_graphs.DONE_WORKING.clear()
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="work")
    env.engine.set_thread(run.id, "1.5")
    working = threading.Thread(target=env.engine.execute_run, args=(run.id,), daemon=True)
    try:
        working.start()
        assert custom_graphs.WORKING.wait(WAIT)
        held = _lock_backends(migrated_pg_url)
        assert len(held) == 1, held
        _drop_connections(migrated_pg_url, held)  # the server frees the run's lock
        with other.locks.try_hold(run.id) as free:
            assert free, "the lock is lost while the agent works"

        clock.now = utcnow() + 3 * LEASE  # long past its start, as the store sees it
        deadline = utcnow() + dt.timedelta(seconds=WAIT)
        while _touched(env, run.id) < clock.now:  # the agent's process keeps it touched
            assert utcnow() < deadline, "a run at work was never touched"
            custom_graphs.DONE_WORKING.wait(0.05)  # polling the store: no event to wait on
        assert other.reconcile().advanced == 0, "a run at work taken for stalled"
        assert _status(env, run.id) == "running"
    finally:
        custom_graphs.DONE_WORKING.set()
        working.join(WAIT)
        other.db.dispose()
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()
    assert not working.is_alive()
    assert _status(env, run.id) == "completed", "the agent's own process finished it"
    assert [r.status for r in env.notes.finished] == ["completed"], "told once, by it"


def _touched(env, run_id: str) -> dt.datetime:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None
        return run.updated_at


def _status(env, run_id: str) -> str:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        return s.scalars(sa.select(Run.status).where(Run.id == run_id)).one()
