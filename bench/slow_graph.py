"""The benchmark's agent: one gated call, then a tool that takes ``BENCH_TOOL_SECONDS``, or the
``tool_seconds=S`` the request names (runs of different lengths from one bot process)."""

from __future__ import annotations

import os
import re
import time
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, interrupt


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool


def ask(state: State) -> State:
    request = next(m.text for m in state["messages"] if isinstance(m, HumanMessage))
    answer: Any = interrupt(
        {
            "action_requests": [{"name": "slow_change", "args": {"request": request[:200]}}],
            "review_configs": [
                {"action_name": "slow_change", "allowed_decisions": ["approve", "reject"]}
            ],
        }
    )
    return {"approved": answer["decisions"][0]["type"] == "approve"}


def _tool_seconds(state: State) -> float:
    request = next(m.text for m in state["messages"] if isinstance(m, HumanMessage))
    named = re.search(r"tool_seconds=([0-9.]+)", request)
    return float(named.group(1) if named else os.environ.get("BENCH_TOOL_SECONDS", "0.5"))


def act(state: State) -> State:
    if state.get("approved"):
        time.sleep(_tool_seconds(state))
    return {"messages": [AIMessage(content="done" if state.get("approved") else "skipped")]}


def build_graph(checkpointer: Checkpointer) -> CompiledStateGraph:
    graph = StateGraph(State)
    graph.add_node("ask", ask)
    graph.add_node("act", act)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)
