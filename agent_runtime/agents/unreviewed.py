"""Calls that need no reviewer still leave a trace: one audit event per call of a tool the
policy lets run without a card (``approval: none``), e.g. Deep Agents' read-only ``ls`` or
``read_file``. Nobody is asked, so nobody tires of approving reads; auditors still see what the
agent looked at."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from agent_runtime.policy import Policy
from agent_runtime.workflow_audit import WorkflowAudit

UNREVIEWED_EVENT = "tool_ran_unreviewed"
ARG_LIMIT = 500
"""Characters kept of each argument in the audit event (a file's content is not evidence here)."""


class UnreviewedCallAudit(AgentMiddleware):
    def __init__(self, *, policy: Policy, audit: WorkflowAudit) -> None:
        super().__init__()
        self.policy = policy
        self.audit = audit

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        result = handler(request)
        self._record(request, result)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The same, for graphs run asynchronously (LangGraph Server): the store is written
        off the event loop."""
        result = await handler(request)
        await asyncio.to_thread(self._record, request, result)
        return result

    def _record(self, request: ToolCallRequest, result: ToolMessage | Command[Any]) -> None:
        call = request.tool_call
        rule = self.policy.rule_for(call["name"])
        if rule.gated:
            return
        # What the policy redacts stays out of this event as out of every other.
        args = rule.redacted(call.get("args") or {}) or {}
        status = result.status if isinstance(result, ToolMessage) else "success"
        self.audit(
            request.runtime.config,
            UNREVIEWED_EVENT,
            {
                "tool": call["name"],
                "tool_call_id": call.get("id"),
                "args": {k: _short(v) for k, v in args.items()},
                "status": status,
            },
        )


def _short(value: Any) -> Any:
    text = value if isinstance(value, str) else None
    if text is not None and len(text) > ARG_LIMIT:
        return text[:ARG_LIMIT] + f"... ({len(text)} characters)"
    return value
