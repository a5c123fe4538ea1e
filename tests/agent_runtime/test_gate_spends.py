"""Which approval a gated call spends when calls race or repeat: one effect for one approval,
and a call never takes an identical call's approval."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agent_runtime.gate import GateRefused
from agent_runtime.graph_runtime import close_checkpointer
from store.models import ActionExecution, ApprovalRequest
from tests.agent_runtime.engine_env import SEND, make_env, paused_run
from tests.agent_runtime.gate_helpers import SEND_ARGS, blocked, config, resuming


@pytest.fixture
def env(tmp_path):  # type: ignore[no-untyped-def]
    return make_env(tmp_path)


def _approved(env) -> str:  # type: ignore[no-untyped-def]
    """A run whose one action is approved and whose request is being resumed."""
    run_id, _action = paused_run(env)
    with env.db.transaction() as s:
        s.scalars(select(ApprovalRequest)).one().actions[0].outcome = "approved"
    resuming(env, run_id)
    return run_id


def test_replicas_racing_for_one_approval_on_postgresql_run_it_once(tmp_path, migrated_pg_url):
    """Two processes' calls spend the same approval at the same moment: one effect, one
    refusal, on the production store."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run_id = _approved(env)
        start = threading.Barrier(8)
        effects: list[str] = []

        def call(n: int) -> str:
            start.wait()
            try:
                return env.gate.run(
                    config(run_id),
                    tool_name="send_external_message",
                    args=SEND_ARGS,
                    effect=lambda: effects.append(f"c{n}") or "sent",
                    tool_call_id=f"c{n}",
                )
            except GateRefused:
                return "refused"

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(call, range(8)))
        assert sorted(outcomes) == ["refused"] * 7 + ["sent"]
        assert len(effects) == 1
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


@pytest.mark.parametrize("first_finishes", [False, True], ids=["still_running", "finished"])
def test_one_call_run_twice_at_once_never_spends_a_second_identical_approval(
    tmp_path, migrated_pg_url, monkeypatch, first_finishes
):
    """Two identical calls approved in one batch, each its own approval. The first call runs
    twice at the same moment (a server running a node twice): the second run waits for the
    first's spend, then must not take the approval of the other call, which would run the
    effect again under another operation id (its idempotency key differs). It gets the first
    run's result if that is kept by then, and is refused as a duplicate otherwise (no notice
    in the thread: nothing was blocked)."""
    import threading

    from store.executions import ExecutionRepository

    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run_id, _action = paused_run(env, f"{SEND}\n{SEND}")
        with env.db.transaction() as s:
            first, second = s.scalars(select(ApprovalRequest)).one().actions
            first.outcome = second.outcome = "approved"
            named = first.tool_call_id
            assert named and second.tool_call_id and named != second.tool_call_id
        resuming(env, run_id)
        spent_first = threading.Event()
        second_tries = threading.Event()
        real_start = ExecutionRepository.start

        def start(self, action_id, *, tool, key, tool_call_id):  # type: ignore[no-untyped-def]
            if threading.current_thread().name == "second":
                second_tries.set()  # then waits, in PostgreSQL, for the first's commit
                spent = real_start(self, action_id, tool=tool, key=key, tool_call_id=tool_call_id)
                assert not first_finishes or first_done.wait(10)
                return spent
            spent = real_start(self, action_id, tool=tool, key=key, tool_call_id=tool_call_id)
            spent_first.set()
            assert second_tries.wait(10), "the second run reached its spend"
            return spent

        monkeypatch.setattr(ExecutionRepository, "start", start)
        outcomes: dict[str, str] = {}
        second_done, first_done = threading.Event(), threading.Event()
        effects: list[str] = []

        def effect() -> str:  # lasts until the second run is answered, unless it finishes
            effects.append(threading.current_thread().name)
            assert first_finishes or second_done.wait(10)
            return "sent"

        def call() -> None:
            me = threading.current_thread().name
            if me == "second":
                assert spent_first.wait(10)
            try:
                outcomes[me] = env.gate.run(
                    config(run_id),
                    tool_name="send_external_message",
                    args=SEND_ARGS,
                    effect=effect,
                    tool_call_id=named,
                )
            except GateRefused as refused:
                outcomes[me] = str(refused)
            finally:
                (second_done if me == "second" else first_done).set()

        runs = [threading.Thread(target=call, name=n) for n in ("first", "second")]
        for t in runs:
            t.start()
        for t in runs:
            t.join(30)
        assert outcomes["first"] == "sent" and effects == ["first"]
        if first_finishes:
            assert outcomes["second"] == "sent", "its result, kept: nothing ran again"
        else:
            assert outcomes["second"].startswith("Not run again: this very send_external_message")
            assert [e.reason for e in blocked(env)] == [
                "this very call is already running (it was started twice at once)"
            ]
        assert env.notes.blocked == [], "nothing was blocked that the thread must hear of"
        with env.db.transaction() as s:
            spent = s.scalars(select(ActionExecution.action_id)).all()
        assert spent == [first.id], "the other call's approval is still its own"
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_call_whose_own_approval_another_call_spent_is_refused_and_the_thread_told(env):
    """Two identical calls approved in one batch; a third call with the same arguments (no
    approval reviewed as it) spends the first call's. The first call then spends nothing, not
    even the second call's approval, and is refused as usual, with a notice in the thread."""
    run_id, _action = paused_run(env, f"{SEND}\n{SEND}")
    with env.db.transaction() as s:
        first, second = s.scalars(select(ApprovalRequest)).one().actions
        first.outcome = second.outcome = "approved"
        own, other = first.tool_call_id, second.tool_call_id
    resuming(env, run_id)
    effects: list[str] = []

    def send(call_id: str) -> str:
        return env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=lambda: effects.append(call_id) or "sent",
            tool_call_id=call_id,
        )

    assert send("call_unreviewed") == "sent"
    with pytest.raises(GateRefused, match="already used by another call"):
        send(own)
    assert [reason for _run, _tool, reason in env.notes.blocked] == [
        "its approval was already used by another call"
    ]
    assert send(other) == "sent", "the second call's approval is still its own"
    assert effects == ["call_unreviewed", other]


@pytest.mark.parametrize(
    ("held", "refusal"),
    [
        ("UPDATE runs SET status = 'cancelled' WHERE id = :run", "its run was cancelled"),
        ("UPDATE execution_switch SET paused = true, reason = 'incident'", "paused"),
    ],
    ids=["cancel", "pause"],
)
def test_a_cancel_or_a_pause_committed_while_the_gate_waits_for_it_refuses_the_call(
    tmp_path, migrated_pg_url, held, refusal
):
    """On PostgreSQL the gate's first look holds the run's row and the kill switch, and reads
    what the call may spend, in one statement. A cancel or a pause under way holds one of
    those rows: the look waits for it, and once it commits the call is refused, though the
    rest of what the look read is as it was before the wait."""
    import threading
    import time

    from sqlalchemy import text

    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run_id = _approved(env)
        effects: list[str] = []
        outcome: list[str] = []

        def call() -> None:
            try:
                env.gate.run(
                    config(run_id),
                    tool_name="send_external_message",
                    args=SEND_ARGS,
                    effect=lambda: effects.append("sent") or "sent",
                    tool_call_id="c1",
                )
                outcome.append("ran")
            except GateRefused as refused:
                outcome.append(str(refused))

        with env.db.engine.connect() as other:
            other.execute(text(held), {"run": run_id})  # its transaction is under way
            gate = threading.Thread(target=call)
            gate.start()
            waiting = text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND query LIKE '%FOR SHARE%'"
            )
            deadline = time.monotonic() + 30
            with env.db.engine.connect() as watch:
                while not watch.execute(waiting).scalar():  # the look waits for the row
                    watch.rollback()
                    assert gate.is_alive() and time.monotonic() < deadline, outcome
            other.commit()
            gate.join(30)
        assert effects == [] and len(outcome) == 1 and refusal in outcome[0], outcome
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def _twice(env, run_id: str, *, wait_inside, done) -> tuple[list[str], dict[str, str]]:  # type: ignore[no-untyped-def]
    """The same call (one tool-call id) run by a thread "first", then, once it is inside its
    effect, by a thread "second". ``wait_inside``: what the effect waits for before it returns;
    ``done(name)``: called as each call returns. The effects run and what each call got."""
    import threading

    inside = threading.Event()
    effects: list[str] = []
    outcomes: dict[str, str] = {}

    def effect() -> str:
        effects.append(threading.current_thread().name)
        inside.set()
        assert wait_inside.wait(10), "the other call went on meanwhile"
        return "sent"

    def call() -> None:
        me = threading.current_thread().name
        try:
            outcomes[me] = env.gate.run(
                config(run_id),
                tool_name="send_external_message",
                args=SEND_ARGS,
                effect=effect,
                tool_call_id="c1",
            )
        except GateRefused as refused:
            outcomes[me] = str(refused)
        finally:
            done(me)

    first = threading.Thread(target=call, name="first")
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=call, name="second")
    second.start()
    for thread in (first, second):
        thread.join(10)
    return effects, outcomes


def _second_refused_while_the_first_runs(env, run_id: str) -> None:  # type: ignore[no-untyped-def]
    """``_twice``, the first call's effect waiting for the second to be answered: the effect
    ran once, and the second was refused as the same call running."""
    import threading

    second_done = threading.Event()
    effects, outcomes = _twice(
        env,
        run_id,
        wait_inside=second_done,
        done=lambda me: me == "second" and second_done.set(),
    )
    assert effects == ["first"] and outcomes["first"] == "sent"
    assert outcomes["second"].startswith("Not run again: this very send_external_message")


def test_a_call_arriving_while_the_same_call_runs_its_effect_is_not_run_again(env):
    """A model that sends one tool-call id twice in a message gets both calls run at once by a
    tool node. The second looks after the first spent the approval, while the first is still
    inside its effect: in the store that looks like a call cut short by a crash, whose replay
    would run the effect again. It is refused as a duplicate instead; the effect runs once."""

    run_id = _approved(env)
    _second_refused_while_the_first_runs(env, run_id)
    again = env.gate.run(
        config(run_id),
        tool_name="send_external_message",
        args=SEND_ARGS,
        effect=str,
        tool_call_id="c1",
    )
    assert again == "sent", "once it finished, the same call gets its result back"


def test_a_call_that_looked_while_the_same_call_ran_gets_the_result_kept_since(
    tmp_path, migrated_pg_url
):
    """The second call looked while the first was inside its effect (it saw a call cut
    short); the first then kept its result and let go of the action before the second took
    it. The second reads the record again once it holds the action: it gets the result, and
    the effect does not run again. (On PostgreSQL: SQLite's write lock, held from the look,
    keeps the first from keeping its result in between.)"""
    import threading

    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run_id = _approved(env)
        looked, first_done = threading.Event(), threading.Event()
        real_take = env.gate.in_flight.take

        def take(action_id: str) -> bool:
            if threading.current_thread().name == "second":
                looked.set()
                assert first_done.wait(10), "the first call kept its result meanwhile"
            return real_take(action_id)

        env.gate.in_flight.take = take  # type: ignore[method-assign]
        effects, outcomes = _twice(
            env, run_id, wait_inside=looked, done=lambda me: me == "first" and first_done.set()
        )
        assert effects == ["first"] and outcomes == {"first": "sent", "second": "sent"}
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_the_same_call_arriving_while_a_long_effect_runs_is_not_run_again(env):
    """The first call's effect outlasts the time after which a hold never given back is
    taken for one cut short (an infrastructure change may take hours): while it runs, the
    same call arriving again is refused as a duplicate, however late."""
    import threading

    from agent_runtime.in_flight import STALE_AFTER, InFlight

    run_id = _approved(env)
    now = [1000.0]
    env.gate.in_flight = InFlight(clock=lambda: now[0])
    real_take = env.gate.in_flight.take

    def take(action_id: str):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "second":
            now[0] += 4 * STALE_AFTER  # the first's effect has run for an hour by now
        return real_take(action_id)

    env.gate.in_flight.take = take  # type: ignore[method-assign]
    _second_refused_while_the_first_runs(env, run_id)


def test_a_long_effect_whose_result_could_not_be_kept_is_not_run_again_at_once(env):
    """The effect outlasted the staleness window, then keeping its result failed: the same
    call tried again right after (a retry policy on the tool node, say) is refused as a
    duplicate, not taken for one cut short."""
    from agent_runtime.gate import GateRefused
    from agent_runtime.in_flight import STALE_AFTER, InFlight

    run_id = _approved(env)
    now = [1000.0]
    env.gate.in_flight = InFlight(clock=lambda: now[0])
    effects: list[int] = []

    def long_effect() -> str:
        effects.append(1)
        now[0] += 4 * STALE_AFTER  # an hour-long change
        return "changed"

    real_finish = env.gate.finish

    def finish_fails(grant, result):  # type: ignore[no-untyped-def]
        env.gate.finish = real_finish  # type: ignore[method-assign]
        raise ConnectionError("the store went away for a moment")

    env.gate.finish = finish_fails  # type: ignore[method-assign]
    call = {"tool_name": "send_external_message", "args": SEND_ARGS, "tool_call_id": "c1"}
    with pytest.raises(ConnectionError):
        env.gate.run(config(run_id), effect=long_effect, **call)
    with pytest.raises(GateRefused, match="Not run again"):
        env.gate.run(config(run_id), effect=long_effect, **call)
    assert effects == [1]
