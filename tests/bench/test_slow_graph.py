"""The benchmark's agent, served by the bot, runs its tool through the point-of-effect gate as
a deployed agent would: the bot's figures include the gate's checks, the plain floors' do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from sqlalchemy import select

from agent_runtime.gate import GateRefused
from agent_runtime.graph_runtime import close_checkpointer
from bench import slow_graph
from store.models import ActionExecution
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run

AGENT = "bench.slow_graph:build_graph"


@pytest.fixture
def env(tmp_path: Path, migrated_pg_url: str):  # type: ignore[no-untyped-def]
    env = make_env(tmp_path, AGENT, url=migrated_pg_url)
    yield env
    close_checkpointer(env.runtime.checkpointer)
    env.db.dispose()


def test_an_approved_change_spends_its_approval_at_the_tool(env) -> None:  # type: ignore[no-untyped-def]
    run_id, action_id = paused_run(env, "change tool_seconds=0")
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").completed
    with env.db.transaction() as s:
        (spent,) = s.scalars(select(ActionExecution)).all()
        assert (spent.action_id, spent.result) == (action_id, "done")
    (finished,) = env.notes.finished
    assert (finished.id, finished.status) == (run_id, "completed")


def test_the_tool_refuses_a_resume_the_bot_did_not_approve(env) -> None:  # type: ignore[no-untyped-def]
    """Resumed straight on its thread, past the bot, the change does not run."""
    run_id, _action_id = paused_run(env, "change tool_seconds=0")
    resume = Command(resume={"decisions": [{"type": "approve"}]})
    with pytest.raises(GateRefused):
        env.runtime.invoke(resume, run_id)
    with env.db.transaction() as s:
        assert s.scalars(select(ActionExecution)).all() == []


def test_without_a_gate_the_graph_is_what_a_plain_resume_runs() -> None:
    graph = slow_graph.build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "change tool_seconds=0")]}, config)
    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert done["messages"][-1].content == "done"
