"""Bring your own agent: a plain LangGraph graph (no Deep Agents) behind the approval bot.

Run it with ``AGENT=examples.plain_graph:build_graph approval-bot serve``. The bot calls
``build_graph(checkpointer, gate=...)`` and drives the compiled graph: the ``review`` node pauses
on a HITL request, the bot posts a card, and the ``refund`` node pays only if it was approved.
The payment itself goes through the bot's point-of-effect gate, so it refuses to run without a
matching approval even if the graph were rewired to skip the review.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, interrupt

from agent_runtime.gate import EffectGate, GateRefused

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


def make_refund(gate: EffectGate | None) -> Any:
    def refund(state: RefundState, config: RunnableConfig) -> RefundState:
        if not state.get("approved"):
            return {"messages": [AIMessage(content="No refund: a reviewer rejected it.")]}
        order = state["refund"]

        def pay() -> str:
            REFUNDS.append(order)
            return f"Refunded {order['amount_eur']} EUR."

        try:
            text = (
                gate.run(config, tool_name="refund_customer", args=order, effect=pay)
                if gate is not None
                else pay()
            )
        except GateRefused as exc:
            text = str(exc)
        return {"messages": [AIMessage(content=text)]}

    return refund


def build_graph(checkpointer: Checkpointer, gate: EffectGate | None = None) -> CompiledStateGraph:
    graph = StateGraph(RefundState)
    graph.add_node("plan", plan)
    graph.add_node("review", review)
    graph.add_node("refund", make_refund(gate))
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "review")
    graph.add_edge("review", "refund")
    graph.add_edge("refund", END)
    return graph.compile(checkpointer=checkpointer)
