"""The agent deployed on LangGraph Server: runs started, interrupts read and resumed through
``langgraph-sdk``, with the guarantees of the local runtime.

How a thread is kept to one run at a time, and a decision to one resume:

- Every run is created with ``multitask_strategy="reject"``: while a run is pending or running
  on the thread, the server refuses another (409) instead of queueing it (``enqueue`` would run
  an answer later, against a state nobody checked), cancelling the running one (``interrupt``)
  or deleting it (``rollback``, which could erase the checkpoint of a tool that already had its
  effect). A refused run changed nothing; the resumer fails the request closed.
- One process resumes a request: the database claim (and its lease) on the approval decides
  which. The bot's own per-thread lock still orders the bot's bookkeeping for the thread
  (recording a stop, posting its cards, a cancel); the server's queue guards the thread itself,
  against any client.
- A resume is ``{interrupt_id: answer}``: it can only answer the interrupt that was reviewed,
  never a newer one (an id that is not waiting answers nothing). A resume run that saved no
  step answered nothing (the interrupt was answered on the server by someone else since the
  bot checked it): it is reported as failed, never as resumed. ``strict_resume`` asks the
  servers that support it to fail such a run themselves.
- ``state`` first waits for the thread's runs in flight: a process that died while a run it
  started was still running leaves a thread that the next process reads only once that run is
  done, so an interrupt the server already consumed is never answered again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateSnapshot
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import LangGraphError, NotFoundError
from langgraph_sdk.schema import Command as WireCommand

from agent_runtime.agent_entry import build_graph
from agent_runtime.agents.workspace import Workspace
from agent_runtime.call_identity import server_thread_id
from agent_runtime.catalog import ToolCatalog
from agent_runtime.errors import AgentLoadError, ApprovalError
from agent_runtime.faults import fault_point
from agent_runtime.gate import EffectGate
from agent_runtime.graph_runtime import resolve_model
from agent_runtime.policy import Policy
from agent_runtime.remote_state import (
    NO_THREAD,
    messages_of,
    run_config,
    snapshot_of,
)
from agent_runtime.workflow_audit import workflow_audit

logger = logging.getLogger(__name__)
IN_FLIGHT = ("pending", "running")
ATTEMPT_KEY = "approval_attempt"
"""Run metadata naming the call that created it, to find a run whose creation went unanswered."""
TIMEOUT = (30.0, 600.0, 30.0, 30.0)
"""connect, read (a run is joined for at most this long), write, pool: seconds."""


class RemoteRunFailed(ApprovalError):
    """A run on the server ended in an error (or was cancelled there)."""


@dataclass
class RemoteRuntime:
    """One assistant (graph id or assistant id) on one LangGraph Server."""

    client: Any  # langgraph_sdk's SyncLangGraphClient
    assistant: str
    catalog: ToolCatalog
    recursion_limit: int = 50

    def check(self, url: str) -> None:
        """At start-up, one line when the server does not answer or has no such assistant
        (an assistant's UUID, or a graph id: runs then go to that graph's default
        assistant)."""
        try:
            if _is_uuid(self.assistant):
                self.client.assistants.get(self.assistant)
                return
            found = self.client.assistants.search(graph_id=self.assistant, limit=1)
        except NotFoundError:
            found = []
        except (LangGraphError, httpx.HTTPError) as exc:
            detail = " ".join(str(exc).split())[:200]
            raise AgentLoadError(f"LANGGRAPH_URL: {url} does not answer ({detail})") from None
        if not found:
            raise AgentLoadError(
                f"LANGGRAPH_ASSISTANT {self.assistant!r}: no such assistant or graph on {url}"
            )

    def state(self, thread_id: str) -> StateSnapshot:
        server_id = server_thread_id(thread_id)
        try:
            self._settle(server_id)
            return snapshot_of(self.client.threads.get_state(server_id))
        except NotFoundError:
            return NO_THREAD

    def has_checkpoint(self, thread_id: str) -> bool:
        """The server thread exists only once a run was created on it."""
        try:
            self.client.threads.get(server_thread_id(thread_id))
        except NotFoundError:
            return False
        return True

    def invoke(self, payload: Any, thread_id: str) -> None:
        """Run on the server to the thread's next stop (read it with ``state``: a run's
        output does not say which interrupts are pending)."""
        server_id = server_thread_id(thread_id)
        attempt = uuid.uuid4().hex
        try:
            run_id = self.client.runs.create(
                server_id,
                self.assistant,
                **_run_input(payload),
                config=run_config(thread_id, recursion_limit=self.recursion_limit),
                metadata={ATTEMPT_KEY: attempt},
                multitask_strategy="reject",
                if_not_exists="create",
                durability="sync",
                strict_resume=True,
            )["run_id"]
        except httpx.HTTPError as exc:
            if not _lost(exc):
                raise
            # The answer was lost, not necessarily the run: one the server created is joined,
            # never created again.
            found = self._created(server_id, attempt)
            if found is None:
                raise
            run_id = found
        if not isinstance(payload, Command):
            self._finish(server_id, run_id)
            return
        fault_point("after_resume_sent")
        self._finish(server_id, run_id)
        if not self.client.threads.get_history(server_id, limit=1, metadata={"run_id": run_id}):
            # No step of this run was saved: the interrupt it answers was no longer waiting
            # (answered on the server by another run since the bot checked it).
            raise RemoteRunFailed(
                "the resume answered nothing: the interrupt was no longer waiting on "
                "LangGraph Server (answered there by another run)"
            )

    def _created(self, server_id: str, attempt: str) -> str | None:
        try:
            runs = self.client.runs.list(server_id, limit=20)
        except NotFoundError:
            return None
        return next(
            (r["run_id"] for r in runs if (r.get("metadata") or {}).get(ATTEMPT_KEY) == attempt),
            None,
        )

    def _finish(self, server_id: str, run_id: str) -> None:
        values = self._join(server_id, run_id)
        run = self.client.runs.get(server_id, run_id)
        if run["status"] != "success":
            error = values.get("__error__") if isinstance(values, dict) else None
            detail = (error or {}).get("message") or run["status"]
            raise RemoteRunFailed(f"the run on LangGraph Server ended with: {detail}")

    def _join(self, server_id: str, run_id: str) -> Any:
        """Wait for the run's end. A wait cut short (a timeout, a dropped connection) is
        waited again while the server still answers: the run goes on there either way, and
        calling it failed would misreport a tool that then runs."""
        while True:
            try:
                return self.client.runs.join(server_id, run_id)
            except httpx.HTTPError as exc:
                if not _lost(exc):
                    raise
                logger.warning("waiting for run %s was cut short (%s); waiting again", run_id, exc)
                self.client.runs.get(server_id, run_id)  # raises if the server is gone

    def _settle(self, server_id: str) -> None:
        """Wait for the runs still pending or running on the thread (started by a process
        that died, say) before the thread is read."""
        for run_id in list(self._in_flight(server_id)):
            self._join(server_id, run_id)

    def _in_flight(self, server_id: str) -> Iterator[str]:
        for status in IN_FLIGHT:
            for run in self.client.runs.list(server_id, status=status, limit=100):
                yield run["run_id"]

    def close(self) -> None:
        self.client.http.client.close()


GATEWAY_GAVE_UP = (502, 503, 504)
"""What a proxy in front of the server answers when it stopped waiting (an idle timeout on a
long wait, say): the request may have reached the server, and the run goes on there."""


def _lost(exc: httpx.HTTPError) -> bool:
    """An answer lost on the way, not a refusal by the server."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in GATEWAY_GAVE_UP
    return isinstance(exc, httpx.TransportError)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _run_input(payload: Any) -> dict[str, Any]:
    """A resume ``Command`` becomes the server's ``command`` (its resume map as is); the first
    input is sent as JSON; ``None`` continues the thread where it stopped."""
    if isinstance(payload, Command):
        return {"command": WireCommand(resume=payload.resume)}
    if payload is None:
        return {"input": None}
    if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
        messages = messages_of(payload["messages"])
        return {"input": {**payload, "messages": [m.model_dump() for m in messages]}}
    return {"input": payload}


def open_remote_runtime(
    *,
    url: str,
    assistant: str,
    api_key: str | None,
    agent: str,
    model: str,
    model_kwargs: dict[str, Any] | None = None,
    policy: Policy,
    workspace: Workspace,
    gate: EffectGate,
) -> RemoteRuntime:
    """The agent is also built here, never run: its tool schemas normalize arguments before
    they are hashed, and the server's gate normalizes them with the same agent package."""
    graph = build_graph(
        agent,
        InMemorySaver(),
        offers={
            "policy": policy,
            "model": resolve_model(model, model_kwargs),
            "workspace": workspace,
            "gate": gate,
            "audit": workflow_audit(gate.db),
        },
    )
    gate.catalog.add_graph(graph)
    client = get_sync_client(url=url, api_key=api_key, timeout=TIMEOUT)
    runtime = RemoteRuntime(client=client, assistant=assistant, catalog=gate.catalog)
    runtime.check(url)
    return runtime
