"""The bundled change-request agent, as LangGraph Server loads it (``langgraph.json``).

The server runs the tools, so the point-of-effect gate runs here: on the bot's database
(``DATABASE_URL``) and under the bot's policy (``POLICY_FILE``), with the same agent package
the bot imports to normalize arguments. A gated tool then runs only for a call the bot's
reviewers approved, whoever started the run. The server keeps the checkpoints: the graph is
compiled without a checkpointer.
"""

from __future__ import annotations

import os

from langgraph.graph.state import CompiledStateGraph

from agent_runtime.agents.change_request import build_agent
from agent_runtime.agents.workspace import Workspace
from agent_runtime.catalog import ToolCatalog
from agent_runtime.gate import EffectGate
from agent_runtime.graph_runtime import resolve_model
from agent_runtime.notifier import NullNotifier
from agent_runtime.policy import load_policy
from store.db import Database


def make_graph() -> CompiledStateGraph:
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        raise RuntimeError("DATABASE_URL (the approval bot's database) is required")
    policy = load_policy(os.environ.get("POLICY_FILE"))
    # Blocked calls are audited in the bot's database; the bot's thread is not told from here.
    gate = EffectGate(
        db=Database(database_url), policy=policy, catalog=ToolCatalog(), notifier=NullNotifier()
    )
    graph = build_agent(
        None,
        policy=policy,
        model=resolve_model(os.environ.get("AGENT_MODEL", "offline")),
        workspace=Workspace(os.environ.get("WORKSPACE_DIR", "workspace")).ensure(),
        gate=gate,
    )
    gate.catalog.add_graph(graph)
    return graph


graph = make_graph()
