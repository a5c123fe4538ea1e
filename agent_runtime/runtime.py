"""What the engine needs of the agent it drives, wherever the agent runs.

``GraphRuntime`` runs the compiled graph in this process on our checkpointer;
``RemoteRuntime`` drives a deployment on LangGraph Server. The engine, the run lifecycle and
the resumer see only this interface, so every check they make (the pending interrupt and the
action hash before a resume, validation before the Command, evidence after a crash) holds for
both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from langgraph.types import Interrupt, StateSnapshot

from agent_runtime.catalog import ToolCatalog


class ThreadStop(Protocol):
    """Where a thread stopped: its values (messages as LangChain messages; every key of
    ``wire.STOP_KEYS`` the state has, others maybe not; as the run left them, or as read
    back) and its pending interrupts as a read gives them, subgraphs' included (none: it
    ended). A ``StateSnapshot`` is one."""

    @property
    def values(self) -> Mapping[str, Any] | Any: ...

    @property
    def interrupts(self) -> tuple[Interrupt, ...]: ...


class AgentRuntime(Protocol):
    @property
    def catalog(self) -> ToolCatalog:
        """The agent's tool schemas: arguments are normalized (and hashed) with them."""

    def state(self, thread_id: str) -> StateSnapshot:
        """The thread's settled state: values (messages as LangChain messages), next nodes and
        the pending interrupts, subgraphs' included. ``created_at`` is None for no thread."""

    def has_checkpoint(self, thread_id: str) -> bool:
        """Whether the thread was ever started (a run is never started twice)."""

    def invoke(self, payload: Any, thread_id: str) -> ThreadStop | None:
        """Run the thread to its next stop: the first input, a resume ``Command`` (bound to
        its interrupt id), or ``None`` to finish an interrupted step. Where it stopped, if the
        run itself tells it (its interrupts as ``state`` would read them); ``None``: the
        caller reads it with ``state`` (a failed read is not a failed run)."""

    def close(self) -> None:
        """Release connections."""
