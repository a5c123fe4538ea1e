"""The benchmark's agent: one gated call, then a tool that takes ``BENCH_TOOL_SECONDS``, or the
``tool_seconds=S`` the request names (runs of different lengths from one bot process).

Served by the bot, which hands it the point-of-effect gate, the tool runs through the gate as
a deployed agent's would: the bot's figures include the gate's checks. Built without one (the
plain resume and the durable floor), it is what a user without the bot would run."""

from __future__ import annotations

import os
import re
import time
from functools import partial
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, interrupt

from agent_runtime.gate import EffectGate

TOOL = "slow_change"


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool


def _args(state: State) -> dict[str, Any]:
    request = next(m.text for m in state["messages"] if isinstance(m, HumanMessage))
    return {"request": request[:200]}


def ask(state: State) -> State:
    answer: Any = interrupt(
        {
            "action_requests": [{"name": TOOL, "args": _args(state)}],
            "review_configs": [{"action_name": TOOL, "allowed_decisions": ["approve", "reject"]}],
        }
    )
    return {"approved": answer["decisions"][0]["type"] == "approve"}


def _tool_seconds(state: State) -> float:
    request = next(m.text for m in state["messages"] if isinstance(m, HumanMessage))
    named = re.search(r"tool_seconds=([0-9.]+)", request)
    return float(named.group(1) if named else os.environ.get("BENCH_TOOL_SECONDS", "0.5"))


def _change(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def act(state: State, config: RunnableConfig, *, gate: EffectGate | None = None) -> State:
    if not state.get("approved"):
        return {"messages": [AIMessage(content="skipped")]}
    effect = partial(_change, _tool_seconds(state))
    done = (
        effect()
        if gate is None
        else gate.run(config, tool_name=TOOL, args=_args(state), effect=effect)
    )
    return {"messages": [AIMessage(content=done)]}


def build_graph(checkpointer: Checkpointer, gate: EffectGate | None = None) -> CompiledStateGraph:
    graph = StateGraph(State)
    graph.add_node("ask", ask)
    graph.add_node("act", partial(act, gate=gate))
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)
