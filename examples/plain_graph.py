"""Bring your own agent: a plain LangGraph graph (no Deep Agents) behind the approval bot.

Run it with ``AGENT=examples.plain_graph:build_graph approval-bot serve``. The bot calls
``build_graph(checkpointer)`` and drives the compiled graph: the ``review`` node pauses on a
HITL request, the bot posts a card, and the ``refund`` node runs only if it was approved.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, interrupt

REFUNDS: list[dict[str, Any]] = []  # stands in for the payment system


class RefundState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    refund: dict[str, Any]
    approved: bool


def plan(state: RefundState) -> RefundState:
    request = next(m.text for m in state["messages"] if isinstance(m, HumanMessage))
    amount = int(re.search(r"\d+", request).group()) if re.search(r"\d+", request) else 10
    return {"refund": {"customer": "C-1042", "amount_eur": amount}}


def review(state: RefundState) -> RefundState:
    """The same request shape HumanInTheLoopMiddleware raises, so the bot shows one card."""
    answer = interrupt(
        {
            "action_requests": [
                {"name": "refund_customer", "args": state["refund"], "description": "Refund"}
            ],
            "review_configs": [
                {"action_name": "refund_customer", "allowed_decisions": ["approve", "reject"]}
            ],
        }
    )
    return {"approved": answer["decisions"][0]["type"] == "approve"}


def refund(state: RefundState) -> RefundState:
    if not state.get("approved"):
        return {"messages": [AIMessage(content="No refund: a reviewer rejected it.")]}
    REFUNDS.append(state["refund"])
    return {"messages": [AIMessage(content=f"Refunded {state['refund']['amount_eur']} EUR.")]}


def build_graph(checkpointer: Checkpointer) -> CompiledStateGraph:
    graph = StateGraph(RefundState)
    graph.add_node("plan", plan)
    graph.add_node("review", review)
    graph.add_node("refund", refund)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "review")
    graph.add_edge("review", "refund")
    graph.add_edge("refund", END)
    return graph.compile(checkpointer=checkpointer)
