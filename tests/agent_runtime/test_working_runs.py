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
from tests.agent_runtime.engine_env import REQUESTER, REVIEWER, Clock, decide, make_env, paused_run
from tests.agent_runtime.test_recovery import another_replica

LEASE = dt.timedelta(seconds=1.5)  # kept touched every half second
WAIT = 30.0


_HOLDERS = sa.text(
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def _lock_backends(url: str) -> list[int]:
    """The server processes holding advisory locks in this test's database (the run's)."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return [int(pid) for (pid,) in conn.execute(_HOLDERS)]
    finally:
        engine.dispose()


def _drop_connections(url: str, pids: list[int]) -> None:
    """Terminated, and waited for until gone (their locks with them)."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            for pid in pids:
                gone = conn.execute(sa.text("SELECT pg_terminate_backend(:p, 10000)"), {"p": pid})
                assert gone.scalar(), f"backend {pid} outlived its termination"
    finally:
        engine.dispose()


def test_a_run_at_work_whose_lock_was_lost_is_not_taken_for_stalled(tmp_path, migrated_pg_url):
    clock = Clock()
    agent = "tests.agent_runtime.custom_graphs:held_first_step"
    env = make_env(tmp_path, agent, url=migrated_pg_url, clock=clock, lease=LEASE)
    other = another_replica(env, clock, lease=LEASE)
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

        clock.now = utcnow() + 3 * LEASE  # a stalled run by now, untouched
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


def test_a_run_whose_resume_closed_its_request_is_touched_until_its_next_stop(tmp_path):
    """Once a resume closed its request, nothing open tells maintenance the run is at work
    while its process still draws the closed card (a slow Slack call) before recording the
    next interrupt: its row is kept touched meanwhile."""
    clock = Clock()
    agent = "tests.agent_runtime.custom_graphs:two_reviews_in_one_node"
    env = make_env(tmp_path, agent, clock=clock, lease=LEASE)
    drawing, drawn = threading.Event(), threading.Event()
    recorded = env.notes.approval_updated

    def slow_end_of_card(approval):  # type: ignore[no-untyped-def]
        if approval.status == "resolved":  # the first request, closed by its resume
            drawing.set()
            assert drawn.wait(WAIT), "the test never let the card's update finish"
        recorded(approval)

    env.notes.approval_updated = slow_end_of_card  # type: ignore[method-assign]
    run_id, action_id = paused_run(env, "go")
    approving = threading.Thread(
        target=lambda: decide(env, action_id=action_id, actor=REVIEWER, decision="approve"),
        daemon=True,
    )
    try:
        approving.start()
        assert drawing.wait(WAIT)
        clock.now = utcnow() + 3 * LEASE
        deadline = utcnow() + dt.timedelta(seconds=WAIT)
        while _touched(env, run_id) < clock.now:
            assert utcnow() < deadline, "a run between two stops was never touched"
            drawn.wait(0.05)  # polling the store: no event to wait on
    finally:
        drawn.set()
        approving.join(WAIT)
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()
    assert len(env.notes.requested) == 2, "its next stop recorded, its card posted"
