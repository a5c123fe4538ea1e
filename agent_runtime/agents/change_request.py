"""The bundled example: a Deep Agent that carries out change requests in a workspace folder.

Every tool the policy does not exempt is gated, including those Deep Agents adds. A release
coordinator subagent can send messages; its calls are gated like the parent's, and so are the
calls of Deep Agents' general-purpose subagent. Whatever the wiring, each side-effecting tool
also checks for a matching approval itself (``agent_runtime.gate``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepagents import SubAgent, create_deep_agent
from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from agent_runtime.agents.tools import SELF_REVIEWING, make_tools
from agent_runtime.agents.unreviewed import UnreviewedCallAudit
from agent_runtime.agents.workspace import Workspace
from agent_runtime.gate import EffectGate
from agent_runtime.policy import Policy
from agent_runtime.workflow_audit import workflow_audit

SYSTEM_PROMPT = (
    "You carry out change requests in the project workspace. Use the tools; risky ones are "
    "reviewed by people in Slack before they run. If a call is rejected, read the reviewer's "
    "reason: propose one corrected call only if it addresses the reason, else stop."
)
RELEASE_COORDINATOR = "release-coordinator"


DESCRIPTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "send_external_message": lambda a: (
        f"Send a message to {a.get('recipient')} outside the company"
    ),
    "delete_project_file": lambda a: f"Delete {a.get('path')} from the project's files",
    "publish_report": lambda a: (
        f"Publish {a.get('path')} to the {a.get('channel', 'public')} channel"
    ),
    "write_file": lambda a: f"Write {a.get('file_path')}",
    "edit_file": lambda a: f"Edit {a.get('file_path')}",
    "execute": lambda a: "Run a shell command",
}
"""The business action in words, shown on the card above the arguments."""


def _described(words: Callable[[dict[str, Any]], str]) -> Callable[..., str]:
    def describe(tool_call: Any, _state: Any, _runtime: Any) -> str:
        return words(dict(tool_call.get("args") or {}))[:500]

    return describe


def interrupt_on_from_policy(policy: Policy, tools: dict[str, BaseTool]) -> dict[str, Any]:
    """Gate every tool the policy does not exempt; unknown ones get approve/reject (fail closed).
    Tools that raise their own review interrupt are left to it, so nothing is asked twice."""
    gates: dict[str, Any] = {}
    for name, tool in tools.items():
        rule = policy.rule_for(name)
        reviews_itself = bool((tool.extras or {}).get(SELF_REVIEWING))
        if not rule.gated or reviews_itself:
            gates[name] = False
            continue
        gates[name] = {"allowed_decisions": list(rule.decisions)}
        if name in DESCRIPTIONS:
            gates[name]["description"] = _described(DESCRIPTIONS[name])
    return gates


def _tools_of(graph: CompiledStateGraph) -> dict[str, BaseTool]:
    return dict(getattr(graph.nodes["tools"].bound, "tools_by_name", {}))


def _coordinator(tools: list[BaseTool], middleware: list[Any]) -> SubAgent:
    spec: SubAgent = {
        "name": RELEASE_COORDINATOR,
        "description": "Coordinates releases: tells partners outside the company what shipped.",
        "system_prompt": "You send release messages. Each one is reviewed before it goes out.",
        "tools": [t for t in tools if t.name == "send_external_message"],
    }
    if middleware:
        spec["middleware"] = middleware
    return spec


def _general_purpose(tools: list[BaseTool], middleware: list[Any]) -> SubAgent:
    """Deep Agents adds this subagent with the parent's tools but without middleware passed
    through ``middleware=``: given explicitly, it carries the same per-call review."""
    return {
        "name": GENERAL_PURPOSE_SUBAGENT["name"],
        "description": GENERAL_PURPOSE_SUBAGENT["description"],
        "system_prompt": GENERAL_PURPOSE_SUBAGENT["system_prompt"],
        "tools": tools,
        "middleware": middleware,
    }


def _build(
    checkpointer: Checkpointer,
    *,
    policy: Policy,
    model: BaseChatModel | str,
    workspace: Workspace,
    per_call: bool,
    gate: EffectGate | None,
) -> CompiledStateGraph:
    """Build twice: the first build tells which tools Deep Agents adds, so none runs ungated."""
    tools = make_tools(workspace, gate)
    probe = create_deep_agent(model, tools, subagents=[_coordinator(tools, [])])
    gates = interrupt_on_from_policy(policy, _tools_of(probe))
    traced = [UnreviewedCallAudit(policy=policy, audit=workflow_audit(gate.db))] if gate else []
    if per_call:
        hitl = [HumanInTheLoopMiddleware(interrupt_on=gates, interrupt_mode="per_call"), *traced]
        return create_deep_agent(
            model,
            tools,
            system_prompt=SYSTEM_PROMPT,
            middleware=hitl,
            subagents=[_general_purpose(tools, hitl), _coordinator(tools, hitl)],
            checkpointer=checkpointer,
            name="change-request-assistant",
        )
    return create_deep_agent(
        model,
        tools,
        system_prompt=SYSTEM_PROMPT,
        interrupt_on=gates,
        middleware=traced,
        subagents=[_coordinator(tools, traced)],
        checkpointer=checkpointer,
        name="change-request-assistant",
    )


def build_agent(
    checkpointer: Checkpointer,
    *,
    policy: Policy,
    model: BaseChatModel | str,
    workspace: Workspace,
    gate: EffectGate | None = None,
) -> CompiledStateGraph:
    """One interrupt per model turn (a batch of actions on one card)."""
    return _build(
        checkpointer, policy=policy, model=model, workspace=workspace, per_call=False, gate=gate
    )


def build_per_call_agent(
    checkpointer: Checkpointer,
    *,
    policy: Policy,
    model: BaseChatModel | str,
    workspace: Workspace,
    gate: EffectGate | None = None,
) -> CompiledStateGraph:
    """One ``tool_approval`` interrupt per gated call (``AGENT=...:build_per_call_agent``)."""
    return _build(
        checkpointer, policy=policy, model=model, workspace=workspace, per_call=True, gate=gate
    )
