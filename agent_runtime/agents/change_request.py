"""The bundled example: a Deep Agent that carries out change requests in a workspace folder."""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from agent_runtime.agents.tools import make_tools
from agent_runtime.agents.workspace import Workspace
from agent_runtime.policy import Policy

SYSTEM_PROMPT = (
    "You carry out change requests in the project workspace. Use the tools; risky ones are "
    "reviewed by people in Slack before they run. If a tool call is rejected, do not retry it."
)


def interrupt_on_from_policy(policy: Policy, tool_names: list[str]) -> dict[str, Any]:
    """Gate every tool the policy does not exempt; unknown ones get approve/reject (fail closed)."""
    gates: dict[str, Any] = {}
    for name in tool_names:
        rule = policy.rule_for(name)
        gates[name] = {"allowed_decisions": list(rule.decisions)} if rule.gated else False
    return gates


def _tool_names(graph: CompiledStateGraph) -> list[str]:
    tool_node = graph.nodes["tools"].bound
    return list(getattr(tool_node, "tools_by_name", {}))


def build_agent(
    checkpointer: Checkpointer,
    *,
    policy: Policy,
    model: BaseChatModel | str,
    workspace: Workspace,
) -> CompiledStateGraph:
    """Build twice: the first build tells which tools Deep Agents adds, so none runs ungated."""
    tools = make_tools(workspace)
    probe = create_deep_agent(model, tools, system_prompt=SYSTEM_PROMPT)
    return create_deep_agent(
        model,
        tools,
        system_prompt=SYSTEM_PROMPT,
        interrupt_on=interrupt_on_from_policy(policy, _tool_names(probe)),
        checkpointer=checkpointer,
        name="change-request-assistant",
    )
