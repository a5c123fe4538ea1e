"""The point-of-effect gate on a real store: what it lets through, what it refuses, and that an
approval is spent once."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode
from sqlalchemy import select

from agent_runtime.call_identity import server_thread_id
from agent_runtime.catalog import ToolCatalog
from agent_runtime.gate import EffectGate, GateRefused
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.kill_switch import KillSwitch
from agent_runtime.notifier import NullNotifier
from agent_runtime.protect import gate_tool
from agent_runtime.wire import action_hash
from store.models import Action, ActionExecution, ApprovalRequest, Run, utcnow
from tests.agent_runtime.custom_graphs import TICKET_SCHEMA
from tests.agent_runtime.engine_env import REQUESTER, REVIEWER, decide, make_env, paused_run
from tests.agent_runtime.gate_helpers import (
    SEND_ARGS,
    approved_and_resuming,
    blocked,
    config,
    resuming,
)


@pytest.fixture
def env(tmp_path):  # type: ignore[no-untyped-def]
    return make_env(tmp_path)


def test_a_gated_call_without_any_approval_is_refused_audited_and_told(env):
    run_id, _action = paused_run(env)
    ran: list[str] = []
    with pytest.raises(GateRefused, match="no reviewer approved this call"):
        env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=lambda: ran.append("x") or "sent",
        )
    assert ran == []
    (event,) = blocked(env)
    assert event.run_id == run_id and event.detail["tool"] == "send_external_message"
    assert [(r.id, tool) for r, tool, _reason in env.notes.blocked] == [
        (run_id, "send_external_message")
    ]


def test_a_pending_approval_is_not_enough_only_a_resume_may_spend_it(env):
    run_id, action_id = paused_run(env)
    with pytest.raises(GateRefused):
        env.gate.run(config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=str)
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    assert [e["tool"] for e in env.workspace.effects()] == ["send_external_message"]


def test_an_approval_is_spent_once_and_the_same_call_gets_its_result_back(env):
    run_id, _action = paused_run(env)
    with env.db.transaction() as s:
        action = s.scalars(select(ApprovalRequest)).one().actions[0]
        action.outcome = "approved"
    resuming(env, run_id)
    calls: list[int] = []

    def effect() -> str:
        calls.append(1)
        return f"sent #{len(calls)}"

    run = env.gate.run
    first = run(
        config(run_id),
        tool_name="send_external_message",
        args=SEND_ARGS,
        effect=effect,
        tool_call_id="c1",
    )
    again = run(
        config(run_id),
        tool_name="send_external_message",
        args=SEND_ARGS,
        effect=effect,
        tool_call_id="c1",
    )
    assert (first, again, len(calls)) == ("sent #1", "sent #1", 1), "a repeat after a crash"
    with pytest.raises(GateRefused, match="already used by another call"):
        run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=effect,
            tool_call_id="c2",
        )
    with pytest.raises(GateRefused, match="differ from the ones reviewers approved"):
        run(
            config(run_id),
            tool_name="send_external_message",
            args={**SEND_ARGS, "text": "other"},
            effect=effect,
            tool_call_id="c3",
        )
    assert len(calls) == 1


def test_an_approval_under_an_older_policy_does_not_open_the_gate(env):
    run_id, _action = paused_run(env)
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        request.policy_version = "an-older-version"  # recorded and approved under it
        action = request.actions[0]
        action.action_hash = action_hash(action.tool_name, action.args, "an-older-version")
        action.outcome = "approved"
        request.status = "resuming"
    with pytest.raises(GateRefused, match="earlier version of the approval policy"):
        env.gate.run(config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=str)


def server_config(run_id: str, *, thread: str | None = None) -> dict:
    """A run on LangGraph Server: the server's thread, and the bot's run id it carries."""
    return {
        "configurable": {"approval_run_id": run_id, "thread_id": thread or server_thread_id(run_id)}
    }


def test_a_server_run_naming_another_threads_run_cannot_spend_its_approval(env):
    """Anyone who can start runs on the server can put any ``approval_run_id`` in a run's
    configuration. A run on another thread naming ours (the run id and the tool call id are on
    the card) must neither spend our approval nor pass for a replay of our call and run the
    effect a second time while our resume runs it."""
    run_id, action_id = paused_run(env)
    approved_and_resuming(env, run_id)
    with env.db.transaction() as s:
        ours = s.get(Action, action_id).tool_call_id
    forged = server_config(run_id, thread=str(uuid.uuid4()))
    ran: list[str] = []

    def call(cfg: dict, call_id: str, effect: Callable[[], str]) -> str:
        return env.gate.run(
            cfg,
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=effect,
            tool_call_id=call_id,
        )

    def send() -> str:
        ran.append("sent")
        return "sent"

    with pytest.raises(GateRefused):
        call(forged, "attacker-1", send)
    assert ran == []

    def send_while_a_forged_replay_comes() -> str:
        with pytest.raises(GateRefused):
            call(forged, ours, send)
        return send()

    assert call(server_config(run_id), ours, send_while_a_forged_replay_comes) == "sent"
    assert ran == ["sent"]


def test_calls_the_policy_does_not_gate_run_without_a_record(env):
    run_id, _action = paused_run(env)
    out = env.gate.run(
        config(run_id), tool_name="read_public_report", args={"path": "x"}, effect=lambda: "ok"
    )
    assert out == "ok" and blocked(env) == []


def test_gate_tool_protects_any_tool_and_answers_the_agent_with_an_error(env):
    run_id, _action = paused_run(env)
    effects: list[dict] = []
    ticket = StructuredTool(
        name="create_ticket",
        description="Create a ticket.",
        args_schema=TICKET_SCHEMA,
        func=lambda **kw: effects.append(kw) or "created",
    )
    guarded = gate_tool(env.gate, ticket)
    call = {"name": "create_ticket", "args": {"title": "t"}, "id": "c9", "type": "tool_call"}
    answer = guarded.invoke(call, config(run_id))
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert "did not run" in str(answer.content) and effects == []
    assert env.gate.catalog.normalize("create_ticket", {"title": "t"}) == {
        "title": "t",
        "priority": "low",
    }


def test_the_catalog_finds_tools_in_nodes_with_any_name():
    @tool
    def wire_money(amount: int, currency: str = "EUR") -> str:
        """Pay."""
        return "paid"

    graph = StateGraph(dict)
    graph.add_node("executor", ToolNode([wire_money]))
    graph.add_edge(START, "executor")
    catalog = ToolCatalog()
    catalog.add_graph(graph.compile())
    assert catalog.normalize("wire_money", {"amount": "12"}) == {"amount": 12, "currency": "EUR"}
    assert "amount" in catalog.errors("wire_money", {"amount": "lots"})


def test_a_failed_effect_spends_its_approval_and_a_replay_does_not_run_it_again(env):
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        raise ConnectionError("mail server down")

    kwargs = {"tool_name": "send_external_message", "args": SEND_ARGS, "tool_call_id": "c1"}
    with pytest.raises(ConnectionError):
        env.gate.run(config(run_id), effect=flaky, **kwargs)
    replay = env.gate.run(config(run_id), effect=flaky, **kwargs)
    assert replay == "Failed: ConnectionError: mail server down" and len(attempts) == 1


def test_a_result_the_store_cannot_keep_as_given_is_kept_cleaned_and_never_run_again(on_both):
    """An effect ran: its result must be kept, whatever it holds (PostgreSQL refuses a NUL in
    text), or a replay of the call would take it for one cut short and run it again."""
    env = on_both
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    attempts: list[int] = []

    def effect() -> str:
        attempts.append(1)
        return "sent\x00id=7"

    kwargs = {"tool_name": "send_external_message", "args": SEND_ARGS, "tool_call_id": "c1"}
    assert env.gate.run(config(run_id), effect=effect, **kwargs) == "sent\x00id=7"
    replay = env.gate.run(config(run_id), effect=effect, **kwargs)
    assert replay == "sent\ufffdid=7" and len(attempts) == 1


def test_an_effect_deep_in_nested_graphs_is_spent_once_whatever_its_namespace_length(on_both):
    """A node's effect is named by its task's checkpoint namespace, which grows with each
    subgraph it runs in: past what the store keeps of a call's id, it is named by its digest,
    the same on a replay."""
    env = on_both
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    deep = "|".join(f"research_step_{n}:{uuid.uuid4()}" for n in range(5))
    nested = {**config(run_id), "metadata": {"langgraph_checkpoint_ns": deep}}
    runs: list[int] = []

    def effect() -> str:
        runs.append(1)
        return "sent"

    kwargs = {"tool_name": "send_external_message", "args": SEND_ARGS}
    assert env.gate.run(nested, effect=effect, **kwargs) == "sent"
    assert env.gate.run(nested, effect=effect, **kwargs) == "sent" and len(runs) == 1
    with env.db.transaction() as s:
        (spent,) = s.scalars(select(ActionExecution)).all()
        assert spent.tool_call_id is not None and len(spent.tool_call_id) <= 128


def test_a_call_in_a_run_the_store_does_not_know_still_reads_the_switch(on_both):
    """No run's row to hold the switch's with: it is read on its own, and a pause is told."""
    env = on_both
    switch = KillSwitch(
        db=env.db,
        policy=env.policy,
        notifier=NullNotifier(),
        usergroup_members=lambda _group: frozenset(),
        clock=utcnow,
    )
    switch.pause("operator", reason="incident 9")
    with pytest.raises(GateRefused, match="incident 9"):
        env.gate.run(
            config("no-such-run"), tool_name="send_external_message", args=SEND_ARGS, effect=str
        )


def test_calls_without_a_call_id_are_never_taken_for_one_another(env):
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    kwargs = {"tool_name": "send_external_message", "args": SEND_ARGS}
    assert env.gate.run(config(run_id), effect=lambda: "sent", **kwargs) == "sent"
    with pytest.raises(GateRefused, match="already used"):
        env.gate.run(config(run_id), effect=lambda: "sent again", **kwargs)


def test_constraints_hold_at_the_gate_even_where_no_review_is_needed(env):
    run_id, _action = paused_run(env)
    with pytest.raises(GateRefused, match="not an allowed domain"):
        env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args={"recipient": "boss@competitor.biz", "text": "x"},
            effect=lambda: "sent",
        )


def test_a_tool_the_catalog_cannot_see_is_never_exempt(tmp_path):
    """``when`` would exempt ``{}``-less calls of an unknown tool only on arguments nobody
    normalized; without a schema the gate asks for an approval."""
    from agent_runtime.notifier import NullNotifier
    from agent_runtime.policy import Policy
    from store.db import Database
    from store.migrate import upgrade

    db = Database(f"sqlite:///{tmp_path / 'g.db'}")
    upgrade(db.engine)
    policy = Policy.model_validate(
        {
            "version": "v1",
            "roles": {"rm": {"users": ["U1"]}},
            "tools": {"publish": {"approvers": ["rm"], "when": {"channel": "public"}}},
        }
    )
    gate = EffectGate(db=db, policy=policy, catalog=ToolCatalog(), notifier=NullNotifier())
    with pytest.raises(GateRefused):
        gate.run(config("run_x"), tool_name="publish", args={"channel": "internal"}, effect=str)


def test_an_effect_before_a_second_review_in_the_same_node_is_not_repeated(tmp_path):
    from tests.agent_runtime import custom_graphs

    env = make_env(tmp_path, "tests.agent_runtime.custom_graphs:two_reviews_in_one_node")
    custom_graphs.TWO_STEP_EFFECTS.clear()
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="go")
    env.engine.execute_run(run.id)
    for _step in (1, 2):
        action = env.notes.requested[-1].actions[0]
        assert decide(env, action_id=action.id, actor=REVIEWER, decision="approve").refusal is None
    assert env.runtime.state(run.id).values["answer"] == "sent 1; sent 2"
    assert custom_graphs.TWO_STEP_EFFECTS == ["step 1", "step 2"]
    assert blocked(env) == []


def _approved_send(env, send, *, coroutine=None):  # type: ignore[no-untyped-def]
    """``send`` wrapped by the gate, as an agent is built (before any review: its schema joins
    the catalog); a run whose one call of it is approved and being resumed; that call.
    ``coroutine``: the tool's own, for an async agent (``send`` None)."""
    tool = StructuredTool.from_function(
        send, coroutine=coroutine, name="send_external_message", description="Send."
    )
    guarded = gate_tool(env.gate, tool)
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    call = {"name": "send_external_message", "args": SEND_ARGS, "id": "c1", "type": "tool_call"}
    return guarded, run_id, call


def test_a_wrapped_tool_that_fails_does_not_run_again_on_the_same_approval(env):
    attempts: list[int] = []

    def send(recipient: str, text: str) -> str:
        attempts.append(1)
        raise ConnectionError("mail server down")

    guarded, run_id, call = _approved_send(env, send)
    with pytest.raises(ConnectionError):
        guarded.invoke(call, config(run_id))
    again = guarded.invoke(call, config(run_id))  # e.g. a RetryPolicy on the tools node
    assert isinstance(again, ToolMessage) and "Failed: ConnectionError" in str(again.content)
    assert len(attempts) == 1


def test_a_wrapped_tool_interrupted_inside_its_effect_is_left_cut_short_for_a_replay(env):
    """Interrupted with no result (cancelled, say), the call is left as a crash leaves it: its
    replay runs the effect again under the same key, and is not taken for the same call still
    running."""
    attempts: list[int] = []

    class Interrupted(BaseException):
        pass

    def send(recipient: str, text: str) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise Interrupted
        return "sent"

    guarded, run_id, call = _approved_send(env, send)
    with pytest.raises(Interrupted):
        guarded.invoke(call, config(run_id))
    again = guarded.invoke(call, config(run_id))
    assert isinstance(again, ToolMessage) and again.content == "sent" and len(attempts) == 2


def test_a_cancelled_async_call_of_a_tool_run_in_a_thread_keeps_its_result_and_runs_once(env):
    """On an async agent (LangGraph Server's) a tool with no coroutine of its own runs in a
    thread, which a cancel of its caller does not stop. Its effect goes on, and the gate
    keeps its result: a replay of the call gets it and does not run the effect again."""
    import asyncio
    import threading

    started, release = threading.Event(), threading.Event()
    attempts: list[int] = []

    def send(recipient: str, text: str) -> str:
        attempts.append(1)
        started.set()
        assert release.wait(10), "let go once its caller was cancelled"
        return "sent"

    guarded, run_id, call = _approved_send(env, send)

    async def cancel_midway() -> None:
        task = asyncio.ensure_future(guarded.ainvoke(call, config(run_id)))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()

    asyncio.run(cancel_midway())  # returns once its threads are done
    again = guarded.invoke(call, config(run_id))
    assert isinstance(again, ToolMessage) and again.content == "sent" and len(attempts) == 1


def test_a_refusal_quoting_a_redacted_argument_keeps_it_out_of_the_audit_and_logs(
    env, monkeypatch, caplog
):
    """A constraint's refusal quotes the value it refused; for an argument the policy redacts,
    the audit event and the log line keep the refusal without the value."""
    from agent_runtime.constraints import ArgConstraint

    letters = {"recipient": ArgConstraint(pattern=r"^[a-z]+$")}
    rule = env.gate.policy.rule_for("send_external_message").model_copy(
        update={"redact": ("recipient",), "constraints": letters}
    )
    tools = {**env.gate.policy.tools, "send_external_message": rule}
    monkeypatch.setattr(env.gate, "policy", env.gate.policy.model_copy(update={"tools": tools}))
    run_id, _action = paused_run(env)
    with pytest.raises(GateRefused, match="does not match"):
        env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args={"recipient": "ceo-private@example.com", "text": "x"},
            effect=lambda: "sent",
        )
    (event,) = blocked(env)
    assert "does not match" in str(event.reason)
    assert "ceo-private" not in f"{event.reason} {event.detail} {caplog.text}"


def _one_approved_call(env) -> list[tuple[str, bool]]:  # type: ignore[no-untyped-def]
    """What the database was sent for one approved call, in order: each statement (and each
    "BEGIN") with whether its connection was in autocommit. The call ran once and kept its
    result."""
    from sqlalchemy import event

    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    sent: list[tuple[str, bool]] = []

    def begin(_conn):  # type: ignore[no-untyped-def]
        sent.append(("BEGIN", False))

    def note(conn, _cursor, statement, *_rest):  # type: ignore[no-untyped-def]
        sent.append((statement, bool(getattr(conn.connection.dbapi_connection, "autocommit", 0))))

    event.listen(env.db.engine, "begin", begin)
    event.listen(env.db.engine, "before_cursor_execute", note)
    result = env.gate.run(
        config(run_id),
        tool_name="send_external_message",
        args=SEND_ARGS,
        effect=lambda: "sent",
        tool_call_id="c1",
    )
    event.remove(env.db.engine, "begin", begin)
    event.remove(env.db.engine, "before_cursor_execute", note)
    assert result == "sent"
    with env.db.transaction() as s:
        (execution,) = s.scalars(select(ActionExecution)).all()
        assert (execution.tool_call_id, execution.result) == ("c1", "sent")
    return sent


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_spending_an_approval_and_keeping_its_result_take_one_statement_each(
    tmp_path, request, store
):
    """The gate sits inside every approved tool call, on the reviewer's wait for the result:
    the spend is one conditional insert (no savepoint, no read first) and the result one
    conditional update, and the approved action comes with its request in one read."""
    url = None if store == "sqlite" else request.getfixturevalue("migrated_pg_url")
    env = make_env(tmp_path, url=url)
    try:
        sent = [q for q, _auto in _one_approved_call(env)]
        assert sent.count("BEGIN") == 2, sent  # the spend, then the result
        assert not [q for q in sent if "SAVEPOINT" in q], sent
        touching = [q.split()[0] for q in sent if "action_executions" in q]
        # the first look (what this call spent before: none; on PostgreSQL with its run and
        # the switch held), the spend, the result
        first_look = "SELECT" if store == "sqlite" else "WITH"
        assert touching == [first_look, "INSERT", "UPDATE"], sent
        assert len([q for q in sent if not q.startswith("BEGIN")]) <= 7, sent
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_on_postgresql_an_approved_call_costs_one_transaction_and_one_autocommit_update(
    tmp_path, migrated_pg_url
):
    """Each round trip of the gate is on the reviewer's wait for the result. The spend's
    transaction holds the run's row and the kill switch in one statement (the order every
    holder of both takes them in); the result is one conditional update, which needs no
    transaction of its own around it."""
    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        sent = [(q, auto) for q, auto in _one_approved_call(env) if q != "BEGIN"]
        in_transaction = [q for q, auto in sent if not auto]
        on_their_own = [q for q, auto in sent if auto]
        assert [q.split()[0] for q in on_their_own] == ["UPDATE"], sent
        assert "action_executions" in on_their_own[0], sent
        run_part, _, switch_part = in_transaction[0].partition("execution_switch")
        assert "FROM runs" in run_part and "FOR SHARE" in run_part, sent
        assert "FOR SHARE" in switch_part, sent
        assert not any("execution_switch" in q for q in in_transaction[1:]), sent
        # held, with what this call spent before, what it may spend, and their requests'
        # other actions (the versions they were reviewed at), in one read; the spend
        assert len(in_transaction) == 2, in_transaction
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_on_postgresql_a_store_without_the_switch_row_runs_approved_calls(
    tmp_path, migrated_pg_url
):
    from sqlalchemy import text

    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run_id, _action = paused_run(env)
        approved_and_resuming(env, run_id)
        with env.db.engine.begin() as conn:
            conn.execute(text("DELETE FROM execution_switch"))
        result = env.gate.run(
            config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=lambda: "ok"
        )
        assert result == "ok"
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


@pytest.mark.parametrize("status", ["failed", "completed"])
def test_a_run_that_has_ended_spends_no_approval(env, status):
    """A run whose thread was told it stopped (a failed resume) or finished runs no more
    effects, whatever approval of it is still open and approved later."""
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    with env.db.transaction() as s:
        s.get(Run, run_id).status = status
    ran: list[str] = []
    with pytest.raises(GateRefused, match="its run has already ended"):
        env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=lambda: ran.append("x") or "sent",
            tool_call_id="c1",
        )
    assert ran == []
    with env.db.transaction() as s:
        assert s.scalars(select(ActionExecution)).all() == []


def test_a_call_that_ran_before_its_run_ended_gets_its_result_back_not_a_refusal(env):
    """What ran is told, never denied: a node run again after its run ended (a sibling's
    failure, say) replays the call's stored result; only new effects are refused."""
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    calls: list[int] = []

    def call() -> str:
        return env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=lambda: calls.append(1) or "sent",
            tool_call_id="c1",
        )

    assert call() == "sent"
    with env.db.transaction() as s:
        s.get(Run, run_id).status = "failed"
    assert (call(), calls) == ("sent", [1])
    assert blocked(env) == []


def test_a_wrapped_tool_s_long_effect_is_never_taken_for_one_cut_short(env):
    """The wrapped tool's effect outlasts the time after which a hold never given back goes
    stale: the same call arriving meanwhile is refused as a duplicate, not run again."""
    import threading

    from agent_runtime.in_flight import STALE_AFTER, InFlight

    now = [1000.0]
    env.gate.in_flight = InFlight(clock=lambda: now[0])
    inside, done = threading.Event(), threading.Event()
    attempts: list[int] = []

    def send(recipient: str, text: str) -> str:
        attempts.append(1)
        inside.set()
        assert done.wait(10), "the test never let the effect end"
        return "sent"

    guarded, run_id, call = _approved_send(env, send)
    outputs: list[object] = []
    first = threading.Thread(target=lambda: outputs.append(guarded.invoke(call, config(run_id))))
    first.start()
    try:
        assert inside.wait(10)
        now[0] += 4 * STALE_AFTER  # an hour into the effect
        again = guarded.invoke(call, config(run_id))
    finally:
        done.set()
        first.join(10)
    assert not first.is_alive()
    assert isinstance(again, ToolMessage) and "Not run again" in str(again.content)
    assert len(attempts) == 1
    assert [str(getattr(o, "content", o)) for o in outputs] == ["sent"], "the first one ran"


def test_an_async_call_cancelled_while_its_grant_is_taken_gives_the_grant_back(env):
    """On an async agent, the caller of a tool with a coroutine of its own is cancelled while
    the gate's grant is being taken in a thread (that hop is not stopped): once taken, the
    grant is given back, so the call is left cut short, as a crash leaves it. Its replay runs
    the effect, once, instead of being refused as the same call still running."""
    import asyncio
    import threading

    authorizing, let_through, given_back = threading.Event(), threading.Event(), threading.Event()
    attempts: list[int] = []

    async def send(recipient: str, text: str) -> str:
        attempts.append(1)
        return "sent"

    guarded, run_id, call = _approved_send(env, None, coroutine=send)
    authorize, abandon = env.gate.authorize, env.gate.abandon

    def slow_authorize(*args, **kwargs):  # type: ignore[no-untyped-def]
        authorizing.set()
        assert let_through.wait(10), "the test never let the grant be taken"
        return authorize(*args, **kwargs)

    def abandoned(grant):  # type: ignore[no-untyped-def]
        abandon(grant)
        given_back.set()

    env.gate.authorize, env.gate.abandon = slow_authorize, abandoned  # type: ignore[method-assign]

    async def cancel_in_the_grant() -> None:
        task = asyncio.ensure_future(guarded.ainvoke(call, config(run_id)))
        assert await asyncio.to_thread(authorizing.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        let_through.set()
        assert await asyncio.to_thread(given_back.wait, 10), "the grant taken was kept"
        again = await guarded.ainvoke(call, config(run_id))
        assert isinstance(again, ToolMessage) and again.content == "sent"

    asyncio.run(cancel_in_the_grant())
    assert attempts == [1]
