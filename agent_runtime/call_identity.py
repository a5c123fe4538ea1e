"""Which run and which call a gated call belongs to, as the point-of-effect gate tells them:
the run from the call's configuration (on LangGraph Server, only on the thread derived from it),
the call from its tool-call id or its node's task."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from store.models import CALL_ID_LENGTH

RUN_CONFIG_KEY = "approval_run_id"
"""Where a run on LangGraph Server finds the bot's run id: the server names its threads with
UUIDs of its own, so the thread id there is not the run's."""


SERVER_THREADS = uuid.UUID("6f1d4f5e-3c1a-5b7e-9a0e-5d2b8c4a7e10")
"""The namespace of server thread ids: the server wants UUIDs, our run ids are not."""


def server_thread_id(run_id: str) -> str:
    """The run's thread on the server: derived, not stored, so every replica (and a process
    started after a crash) finds the same thread without asking the database."""
    return str(uuid.uuid5(SERVER_THREADS, run_id))


def thread_of(config: Mapping[str, Any] | None) -> str | None:
    """The bot's run a call belongs to. On the server, anyone who may start runs can write any
    ``approval_run_id`` into a run's configuration: it counts only on the thread derived from
    it, so a run elsewhere cannot spend (or replay) that run's approvals."""
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    claimed = configurable.get(RUN_CONFIG_KEY)
    if claimed is None:
        return str(thread) if thread is not None else None
    return str(claimed) if str(thread) == server_thread_id(str(claimed)) else None


_OURS = ("call-sha256:", "task:", "task-sha256:", "once:")
"""How the ids this module makes begin: a model's id that begins so is never kept as it is."""


def kept_call_id(call_id: str | None) -> str | None:
    """A model's tool-call id as the store keeps it: itself, or its digest (the same wherever
    it is looked up: the review, the gate, the evidence) past what its column holds, or when
    it looks like an id of ours (a model cannot pass for another call, or a node's task)."""
    if call_id is None or (len(call_id) <= CALL_ID_LENGTH and not call_id.startswith(_OURS)):
        return call_id
    return f"{_OURS[0]}{hashlib.sha256(call_id.encode()).hexdigest()}"


def call_id_of(config: Mapping[str, Any] | None, tool_call_id: str | None) -> str:
    """Which call this is, so a replay after a crash is recognised: the tool call id, or for an
    effect inside a graph node, the node's task in the checkpoint (the same on a replay). Failing
    both, a fresh id: such a call is never taken for another one."""
    if tool_call_id:
        return str(kept_call_id(tool_call_id))
    task = ((config or {}).get("metadata") or {}).get("langgraph_checkpoint_ns")
    if not task:
        return f"once:{uuid.uuid4().hex}"
    named = f"task:{task}"
    if len(named) <= CALL_ID_LENGTH:
        return named
    # Nested subgraphs make long namespaces: past what the store keeps, the digest names it.
    return f"task-sha256:{hashlib.sha256(str(task).encode()).hexdigest()}"
