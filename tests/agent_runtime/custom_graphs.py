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


def stubborn_publish(checkpointer, **offers):  # type: ignore[no-untyped-def]
    """A drafter that never adds what the rubric asks for."""
    from agent_runtime.agents import rubric
    from agent_runtime.agents.publish_workflow import build_publish_workflow

    return build_publish_workflow(
        checkpointer,
        workspace=offers["workspace"],
        drafter=lambda request, sales, feedback: rubric.offline_draft(request, sales, []),
        max_iterations=2,
    )


def broken_grader_publish(checkpointer, **offers):  # type: ignore[no-untyped-def]
    from agent_runtime.agents.publish_workflow import build_publish_workflow

    def grader(report, sales):  # type: ignore[no-untyped-def]
        raise RuntimeError("grader model unavailable")

    return build_publish_workflow(checkpointer, workspace=offers["workspace"], grader=grader)
