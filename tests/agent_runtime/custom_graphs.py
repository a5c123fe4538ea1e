"""Small graphs loaded through the AGENT hook in tests."""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    answer: str


def custom_interrupt_graph(checkpointer):  # type: ignore[no-untyped-def]
    """Pauses on a payload that is not a HITL request."""

    def ask(state: State) -> State:
        return {"answer": str(interrupt({"kind": "free-form", "question": "why?"}))}

    graph = StateGraph(State)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph.compile(checkpointer=checkpointer)


def not_a_graph(checkpointer):  # type: ignore[no-untyped-def]
    return "nope"
