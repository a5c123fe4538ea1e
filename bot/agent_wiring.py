"""Which agent runtime the bot drives: the graph in this process, or a LangGraph Server."""

from __future__ import annotations

from agent_runtime.agents.workspace import Workspace
from agent_runtime.gate import EffectGate
from agent_runtime.graph_runtime import open_runtime
from agent_runtime.policy import Policy
from agent_runtime.remote_runtime import open_remote_runtime
from agent_runtime.runtime import AgentRuntime
from bot.settings import Settings


def open_agent(
    settings: Settings, *, policy: Policy, gate: EffectGate, key: bytes | None
) -> AgentRuntime:
    """The agent in this process, or on the LangGraph Server at LANGGRAPH_URL."""
    workspace = Workspace(settings.workspace_dir).ensure()
    if settings.langgraph_url:
        api_key = settings.langgraph_api_key
        return open_remote_runtime(
            url=settings.langgraph_url,
            assistant=settings.langgraph_assistant,
            api_key=api_key.get_secret_value() if api_key is not None else None,
            agent=settings.agent,
            model=settings.agent_model,
            model_kwargs=settings.agent_model_kwargs,
            policy=policy,
            workspace=workspace,
            gate=gate,
        )
    return open_runtime(
        database_url=settings.database_url,
        agent=settings.agent,
        model=settings.agent_model,
        model_kwargs=settings.agent_model_kwargs,
        policy=policy,
        workspace=workspace,
        gate=gate,
        key=key,
        pool_size=settings.db_pool_size,
    )
