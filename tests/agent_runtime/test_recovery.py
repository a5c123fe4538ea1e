"""Recovery of a resume whose process died, judged from evidence: the real bundled agent, a real
SQLite store and checkpointer, and the process's death simulated at a fault point."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy import select

from agent_runtime import announcer as announcer_module
from agent_runtime import engine as engine_module
from agent_runtime import gate as gate_module
from agent_runtime import resume as resume_module
from agent_runtime.engine import ApprovalEngine
from agent_runtime.give_ups import gave_up_text
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.runs import NEVER_STARTED, START_FAILED, STOPPED_MIDWAY
from store.audit_models import AuditEvent
from store.db import Database
from store.models import ApprovalRequest, Run, utcnow
from tests.agent_runtime.engine_env import (
    REQUESTER,
    REVIEWER,
    SEND,
    Env,
    decide,
    make_env,
    paused_run,
)


class Crash(BaseException):
    """The process dies here: nothing after this point runs (not even ``except Exception``)."""


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def env(tmp_path: Path, clock: Clock) -> Iterator[Env]:
    e = make_env(tmp_path, clock=clock)
    yield e
    close_checkpointer(e.runtime.checkpointer)
    e.db.dispose()


def die_at(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    def fault_point(name: str) -> None:
        if name == point:
            raise Crash(name)

    for module in (engine_module, gate_module, resume_module, announcer_module):
        monkeypatch.setattr(module, "fault_point", fault_point)


def approve_and_die(env: Env, monkeypatch: pytest.MonkeyPatch, *, point: str) -> str:
    run_id, action_id = paused_run(env)
    die_at(monkeypatch, point)
    with pytest.raises(Crash):
        decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    monkeypatch.undo()
    return run_id


def lose_the_tool_step(env: Env, run_id: str) -> None:
    """The thread as a lost checkpoint write can leave it: ended after the review, with no
    result for the approved call and nothing left to run."""
    graph, config = env.runtime.graph, env.runtime.config(run_id)
    last = next(name for name in graph.nodes if name.endswith(".after_agent"))
    graph.update_state(config, {"messages": [AIMessage("All done.")]}, as_node=last)
    state = env.runtime.state(run_id)
    assert state.next == () and not state.interrupts


def recover(env: Env, clock: Clock) -> None:
    """A new process, once the dead one's lease ran out."""
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    assert env.engine.reconcile().resumed == 1


def outcome(env: Env) -> tuple[str, str | None, str, list[str]]:
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        run = s.scalars(select(Run)).one()
        kinds = list(s.scalars(select(AuditEvent.kind).order_by(AuditEvent.id)))
        return request.status, request.outcome, run.status, kinds


def effects(env: Env) -> list[str]:
    return [e["tool"] for e in env.workspace.effects()]


def test_killed_inside_the_tool_mid_step_the_step_is_finished_once(env, clock, monkeypatch):
    approve_and_die(env, monkeypatch, point="inside_tool")
    assert env.runtime.state(env.notes.requested[0].run.id).next == ("tools",)
    recover(env, clock)
    status, _, run_status, kinds = outcome(env)
    assert (status, run_status) == ("resolved", "completed")
    assert effects(env) == ["send_external_message"]
    assert "resumed" in kinds and "tool_outcome" in kinds


def test_a_resume_that_finished_before_the_death_is_recorded_from_its_result(
    env, clock, monkeypatch
):
    run_id = approve_and_die(env, monkeypatch, point="after_resume")
    state = env.runtime.state(run_id)
    assert state.next == () and not state.interrupts  # as the dead process left it
    recover(env, clock)
    status, _, run_status, kinds = outcome(env)
    assert (status, run_status) == ("resolved", "completed")
    assert "resumed" in kinds and "action_not_run" not in kinds
    assert effects(env) == ["send_external_message"]


def test_a_thread_that_ended_without_running_the_approved_tool_is_an_honest_failure(
    env, clock, monkeypatch
):
    run_id = approve_and_die(env, monkeypatch, point="after_claim")
    lose_the_tool_step(env, run_id)
    recover(env, clock)
    status, text, run_status, kinds = outcome(env)
    assert status == "failed" and run_status == "failed"
    assert "send_external_message" in (text or "") and "did not run" in (text or "")
    assert "resumed" not in kinds and "run_completed" not in kinds
    assert {"action_not_run", "resume_failed", "run_failed"} <= set(kinds)
    told = env.notes.finished[-1]
    assert told.status == "failed" and "send_external_message" in (told.result_text or "")
    assert "did not run" in (told.result_text or "")
    assert env.notes.updated[-1].status == "failed"  # the card says so too
    assert effects(env) == []


def test_a_tool_killed_before_it_finished_is_reported_as_unknown(env, clock, monkeypatch):
    run_id = approve_and_die(env, monkeypatch, point="inside_tool")
    lose_the_tool_step(env, run_id)
    recover(env, clock)
    status, text, run_status, kinds = outcome(env)
    assert (status, run_status) == ("failed", "failed")
    assert "unknown" in (text or "") and "send_external_message" in (text or "")
    assert "action_effect_unknown" in kinds and "resumed" not in kinds
    assert "unknown" in (env.notes.finished[-1].result_text or "")


def test_an_approved_call_no_witness_can_show_is_not_called_done(tmp_path, clock, monkeypatch):
    """A node that acts without the gate: after the death, nothing shows whether it acted."""
    env = make_env(tmp_path, "tests.agent_runtime.custom_graphs:effect_in_a_node", clock=clock)
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="go")
        env.engine.execute_run(run.id)
        action_id = env.notes.requested[-1].actions[0].id
        die_at(monkeypatch, "after_resume")
        with pytest.raises(Crash):
            decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
        monkeypatch.undo()
        recover(env, clock)
        status, text, run_status, kinds = outcome(env)
        assert (status, run_status) == ("failed", "failed")
        assert "nothing shows whether it ran" in (text or "")
        assert "action_unconfirmed" in kinds and "resumed" not in kinds
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_stalled_run_that_cannot_be_advanced_does_not_stop_the_others(env, clock, monkeypatch):
    """Reconcile goes run by run: one whose next step cannot be recorded (an interrupt the
    store refuses, say) is logged and tried again next time; the other runs, and the steps
    after this one, go on."""
    stuck, _a = paused_run(env)
    fine, _b = paused_run(env)
    with env.db.transaction() as s:
        for request in s.scalars(select(ApprovalRequest)):
            request.status, request.resolved_at = "resolved", utcnow()
        for run in s.scalars(select(Run)):
            run.status, run.updated_at = "waiting", utcnow() - dt.timedelta(hours=1)
    record_stop = env.engine.runs.record_stop
    tried: list[str] = []

    def refusing(run_id: str, state=None):  # type: ignore[no-untyped-def]
        tried.append(run_id)
        if run_id == stuck:
            raise ValueError("the store refused the interrupt")
        return record_stop(run_id, state)

    monkeypatch.setattr(env.engine.runs, "record_stop", refusing)
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    result = env.engine.reconcile()  # returns: the steps after this one ran
    assert sorted(tried) == sorted([stuck, fine]) and result.advanced == 1
    with env.db.transaction() as s:
        left = s.get(Run, stuck)
        assert left.status == "waiting"  # left for a later reconcile, behind the others
        assert left.updated_at == clock.now


def _end(env: Env, run_id: str) -> tuple[str, str | None, bool]:
    """A run's status, result text, and whether its result counts as posted."""
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None
        return run.status, run.result_text, run.result_posted


def _requested_runs(env: Env) -> list[str]:
    return [a.run.id for a in env.notes.requested]


def _run_status(env: Env, run_id: str) -> str:
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None
        return run.status


def test_a_run_whose_process_died_before_recording_its_first_stop_gets_its_card(env, clock):
    """The agent ran to its first interrupt and the process died before recording it: the
    run is left running with no card. Once no one can be at work on it (a lease passed, its
    lock free), maintenance reads where it stopped and posts the card."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    env.engine.set_thread(run.id, "1.5")
    env.runtime.invoke({"messages": [HumanMessage(SEND)]}, run.id)  # then the process died
    assert env.engine.reconcile().advanced == 0, "a run may be at work until a lease passed"
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    assert env.engine.reconcile().advanced == 1
    assert _requested_runs(env) == [run.id] and _run_status(env, run.id) == "waiting"
    assert env.engine.reconcile().advanced == 0, "recorded once"


def test_a_run_whose_start_never_reached_the_agent_fails_and_is_told(env, clock):
    """The slash command was answered, the run stored and its thread posted; then the process
    died, or the start failed and the requester was told so. Maintenance does not start the
    agent then (the requester may have asked again since): the run fails, and says so."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    env.engine.set_thread(run.id, "1.5")
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    assert env.engine.reconcile().advanced == 1
    assert _requested_runs(env) == [] and not env.runtime.has_checkpoint(run.id)
    assert _run_status(env, run.id) == "failed"
    assert [r.result_text for r in env.notes.finished] == [NEVER_STARTED]


def test_a_running_run_that_cannot_be_carried_on_goes_behind_the_others(env, clock, monkeypatch):
    """As for waiting runs: one whose carrying on raises is tried again after the others."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    env.engine.set_thread(run.id, "1.5")
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)

    def broken(run_id: str, state=None):  # type: ignore[no-untyped-def]
        raise ValueError("the store refused it")

    monkeypatch.setattr(env.engine.runs, "record_stop", broken)
    assert env.engine.reconcile().advanced == 0
    with env.db.transaction() as s:
        left = s.get(Run, run.id)
        assert left is not None and (left.status, left.updated_at) == ("running", clock.now)


def test_a_run_at_work_is_left_alone(env, clock):
    """A run whose agent is working (its lock held: a long model call, say) is not touched,
    however long it has been running."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    env.engine.set_thread(run.id, "1.5")
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    with env.engine.locks.hold(run.id):
        assert env.engine.reconcile().advanced == 0
    assert _requested_runs(env) == [] and _run_status(env, run.id) == "running"


def test_a_first_run_that_stopped_midway_unrecorded_fails_and_is_told(tmp_path, clock):
    """The agent raised (or its process died while it worked) and that was never recorded:
    nothing shows what it would do next, and no one asked for it again. It fails, told."""
    env = make_env(tmp_path, "tests.agent_runtime.custom_graphs:failing_first_step", clock=clock)
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="go")
        env.engine.set_thread(run.id, "1.5")
        with pytest.raises(RuntimeError):
            env.runtime.invoke({"messages": []}, run.id)  # then the process died
        clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
        assert env.engine.reconcile().advanced == 1
        assert _run_status(env, run.id) == "failed"
        assert [r.result_text for r in env.notes.finished] == [STOPPED_MIDWAY]
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_run_is_settled_a_lease_after_its_thread_was_posted_and_never_started_once_ended(
    env, clock
):
    """Its thread's post may take long (Slack's rate limits): maintenance counts the lease
    from it. And a run maintenance ended meanwhile is never started by the start that
    follows."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    lease = env.engine.claims.lease + dt.timedelta(seconds=1)
    clock.now = utcnow() + lease
    env.engine.set_thread(run.id, "1.5")  # a lease after the run was stored
    assert env.engine.reconcile().advanced == 0, "a lease from the post, not the run's start"
    clock.now += lease
    assert env.engine.reconcile().advanced == 1
    env.engine.execute_run(run.id)  # the start that was under way
    assert not env.runtime.has_checkpoint(run.id) and _requested_runs(env) == []


def another_replica(env: Env, clock: Clock, *, lease: dt.timedelta | None = None) -> ApprovalEngine:
    """An engine of another process on the same store: its locks are its own."""
    return ApprovalEngine(
        db=Database(env.db.url),
        runtime=env.runtime,
        policy=env.policy,
        notifier=env.notes,
        clock=clock,
        **({"lease": lease} if lease else {}),
    )


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_run_stored_before_its_thread_was_posted_ends_once_no_start_holds_it(
    tmp_path, clock, request, store
):
    """The run was stored and its process died before its thread was posted: its requester
    saw nothing start. While a start posts the thread (however long Slack's rate limits make
    that take) it holds the run's lock, and another replica leaves the run alone; once the
    lock is free the run ends, failed, with nothing posted (a message in the channel, long
    after, would tell nobody anything)."""
    url = None if store == "sqlite" else request.getfixturevalue("migrated_pg_url")
    env = make_env(tmp_path, url=url, clock=clock)
    other = another_replica(env, clock)
    try:
        with env.engine.starting_run(actor=REQUESTER, channel_id="C1", text=SEND) as run:
            clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
            assert other.reconcile().advanced == 0, "its start is posting its thread"
            assert _run_status(env, run.id) == "running"
        # As far as the store can tell, the process died here: the lock is free, no thread.
        assert other.reconcile().advanced == 1
        assert _end(env, run.id) == ("failed", NEVER_STARTED, True)
        assert env.notes.finished == [] and not env.runtime.has_checkpoint(run.id)
        assert other.reconcile().advanced == 0, "ended once"
    finally:
        other.db.dispose()
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_start_that_posted_its_thread_after_the_stalled_list_was_read_is_left_alone(
    env, clock, monkeypatch
):
    """Maintenance listed the run as settled while its start was still posting the thread
    (slowly); the start then posted it and let go of the lock before starting the agent.
    Read again under the lock, the run is no longer settled: it is not ended."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    locks = env.engine.background.locks
    real = locks.try_hold

    def posted_meanwhile(key: str):  # type: ignore[no-untyped-def]
        env.engine.set_thread(run.id, "1.5")  # the start's post came back just now
        return real(key)

    monkeypatch.setattr(locks, "try_hold", posted_meanwhile)
    assert env.engine.reconcile().advanced == 0
    assert _run_status(env, run.id) == "running" and env.notes.finished == []
    monkeypatch.undo()
    env.engine.execute_run(run.id)  # the start goes on
    assert _requested_runs(env) == [run.id]


def test_a_start_whose_thread_could_not_be_posted_ends_its_run_at_once(env, clock):
    """The thread's post failed (the bot is not in the channel, say) and the caller tells the
    requester: the run ends at once, failed, and nothing is posted for it later."""
    starting = env.engine.starting_run(actor=REQUESTER, channel_id="C1", text=SEND)
    with pytest.raises(RuntimeError, match="not_in_channel"), starting as run:
        raise RuntimeError("not_in_channel")
    assert _end(env, run.id) == ("failed", START_FAILED, True), "nothing to post: told"
    clock.now = utcnow() + env.engine.claims.lease + dt.timedelta(seconds=1)
    assert env.engine.reconcile().results == 0 and env.notes.finished == []
    with env.db.transaction() as s:
        kinds = list(s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run.id)))
    assert kinds == ["run_started", "run_failed"], kinds


def _stalled(env: Env, *, thread: str | None) -> str:
    """A run left waiting with nothing open, settled, as after a crash."""
    run_id, _action = paused_run(env)
    with env.db.transaction() as s:
        for request in s.scalars(select(ApprovalRequest)):
            request.status, request.resolved_at = "resolved", utcnow()
        run = s.get(Run, run_id)
        assert run is not None
        run.status, run.updated_at = "waiting", utcnow() - dt.timedelta(hours=1)
        run.thread_ts = thread
    return run_id


def _rounds(env: Env, clock: Clock, *, minutes: float, start: dt.datetime) -> None:
    """Maintenance rounds until ``minutes`` after ``start``, each when the run put back by the
    last one has settled again."""
    step = env.engine.claims.lease + dt.timedelta(seconds=1)
    clock.now = max(clock.now, start)
    while clock.now < start + dt.timedelta(minutes=minutes):
        clock.now += step
        env.engine.reconcile()


def _failing(monkeypatch: pytest.MonkeyPatch, env: Env, error: Exception) -> list[str]:
    tried: list[str] = []

    def cannot(run_id: str, state=None):  # type: ignore[no-untyped-def]
        tried.append(run_id)
        raise error

    monkeypatch.setattr(env.engine.runs, "record_stop", cannot)
    return tried


def test_a_stalled_run_that_cannot_be_carried_on_for_an_hour_ends_and_is_told(
    env, clock, monkeypatch
):
    """A run whose next step keeps failing to be recorded (its checkpoint can no longer be
    loaded, say) is tried again at later rounds. Once it has failed at every try for an hour
    it ends, failed, and its thread hears so (not the error, which is the operators'):
    otherwise it would wait for good with nobody told."""
    run_id = _stalled(env, thread="1.5")
    tried = _failing(monkeypatch, env, ValueError("the checkpoint cannot be loaded"))
    start = utcnow()
    _rounds(env, clock, minutes=59, start=start)
    assert _run_status(env, run_id) == "waiting" and env.notes.finished == []
    assert len(tried) > 5
    _rounds(env, clock, minutes=62, start=start)
    assert _run_status(env, run_id) == "failed"
    [told] = env.notes.finished
    assert told.id == run_id and told.result_text == gave_up_text()
    assert "60 minutes" in told.result_text and "cannot be loaded" not in told.result_text
    before = len(tried)
    _rounds(env, clock, minutes=70, start=start)
    assert len(tried) == before, "ended once, not tried again"


def test_a_stalled_run_without_a_thread_ends_with_nothing_posted(env, clock, monkeypatch):
    run_id = _stalled(env, thread=None)
    _failing(monkeypatch, env, ValueError("the checkpoint cannot be loaded"))
    _rounds(env, clock, minutes=62, start=utcnow())
    assert _end(env, run_id) == ("failed", gave_up_text(), True)
    assert env.notes.finished == []


def test_an_outage_of_the_database_ends_no_stalled_run(env, clock, monkeypatch):
    """The store or the network failing is no fault of the run: after an hour of it, the run
    is still carried on once they are back."""
    import psycopg
    from sqlalchemy.exc import OperationalError

    run_id = _stalled(env, thread="1.5")
    refused = psycopg.OperationalError("connection refused")
    _failing(monkeypatch, env, OperationalError("SELECT 1", {}, refused))
    _rounds(env, clock, minutes=90, start=utcnow())
    assert _run_status(env, run_id) == "waiting"
    monkeypatch.undo()
    _rounds(env, clock, minutes=92, start=clock.now - dt.timedelta(minutes=90))
    assert _run_status(env, run_id) != "waiting" or _requested_runs(env)


@pytest.mark.parametrize("moved_on", ["opened an approval", "recorded a stop"])
def test_the_hour_counts_tries_in_a_row_and_a_try_that_moved_the_run_on_ends_nothing(
    env, clock, monkeypatch, moved_on
):
    """Tries far apart (maintenance stopped between them) start the count again; and a try
    that got as far as posting an approval, or recording a stop, before it failed leaves the
    run to what it recorded, though the count says to give up."""
    run_id = _stalled(env, thread="1.5")
    _failing(monkeypatch, env, ValueError("the checkpoint cannot be loaded"))
    start = utcnow()
    _rounds(env, clock, minutes=30, start=start)
    clock.now += 5 * env.engine.claims.lease  # no round meanwhile (maintenance stopped)
    _rounds(env, clock, minutes=59, start=clock.now)
    assert _run_status(env, run_id) == "waiting", "less than an hour in a row"

    def moves_then_fails(run_id: str, state=None):  # type: ignore[no-untyped-def]
        with env.db.transaction() as s:
            if moved_on == "opened an approval":
                for request in s.scalars(select(ApprovalRequest)):
                    request.status = "pending"
            run = s.get(Run, run_id)
            assert run is not None
            run.updated_at = clock.now  # as recording a stop touches its run
        raise ValueError("failed after it moved the run on")

    monkeypatch.setattr(env.engine.runs, "record_stop", moves_then_fails)
    give_ups = env.engine.background.give_ups
    counted = give_ups.failed
    said: list[bool] = []
    monkeypatch.setattr(give_ups, "failed", lambda *a: said.append(counted(*a)) or said[-1])
    _rounds(env, clock, minutes=12, start=clock.now)
    assert said and said[0], "the count said to give up"
    assert _run_status(env, run_id) == "waiting" and env.notes.finished == []
