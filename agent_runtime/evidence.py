"""Whether the approved actions of a resume really ran, judged from what they left behind.

A process that died while resuming leaves two witnesses: the checkpoint (the tool's result
message, once the step that ran it was saved) and the gate's execution record (written when the
effect starts, finished when it returns). A checkpoint that no longer waits on the interrupt
proves nothing by itself: recovery asks these witnesses before it calls anything done.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_runtime.call_identity import kept_call_id
from agent_runtime.runtime import ThreadStop
from agent_runtime.wire import MESSAGES, tool_results
from store.db import Database
from store.executions import SPENDABLE_OUTCOMES, ExecutionRepository
from store.models import ApprovalRequest
from store.repositories import AuditRepository


class Unconfirmed(enum.StrEnum):
    """What is known of an approved action that left no result."""

    NOT_RUN = "action_not_run"
    """The run's own call, with no result in the checkpoint and no execution started."""
    EFFECT_UNKNOWN = "action_effect_unknown"
    """The execution started and never finished: the process died inside the tool."""
    UNWITNESSED = "action_unconfirmed"
    """A call the run's checkpoint does not show (a subagent's, or an effect inside a node)
    and no execution record: nothing tells whether it ran."""


@dataclass(frozen=True)
class Gap:
    action_id: str
    tool_name: str
    operation_id: str
    kind: Unconfirmed


def spent(db: Database, request: ApprovalRequest) -> bool:
    """Whether a tool call already spent one of the request's approvals: someone resumed its
    interrupt (directly on LangGraph Server, say), and what ran must be told, not denied."""
    with db.transaction() as s:
        return bool(ExecutionRepository(s).of_actions([a.id for a in request.actions]))


def gaps(db: Database, request: ApprovalRequest, *, state: ThreadStop) -> list[Gap]:
    """Approved (or edited) actions of ``request`` with no proof of having run in ``state``
    nor a finished execution record; empty when every one of them is accounted for."""
    approved = [a for a in request.actions if a.outcome in SPENDABLE_OUTCOMES]
    if not approved:
        return []
    values = state.values if isinstance(state.values, dict) else {}
    messages = values.get(MESSAGES, [])
    results = tool_results(messages, [a.tool_call_id for a in approved], kept=kept_call_id)
    calls = [c for m in messages for c in (getattr(m, "tool_calls", None) or [])]
    own_calls = {kept_call_id(c.get("id")) for c in calls}
    with db.transaction() as s:
        runs = ExecutionRepository(s).of_actions([a.id for a in approved])
        done = {action_id: row.finished_at is not None for action_id, row in runs.items()}
    found = []
    for action in approved:
        if action.tool_call_id and action.tool_call_id in results:
            continue
        finished = done.get(action.id)  # None: never started
        if finished:
            continue
        if finished is not None:
            kind = Unconfirmed.EFFECT_UNKNOWN
        elif action.tool_call_id and action.tool_call_id in own_calls:
            kind = Unconfirmed.NOT_RUN
        else:
            kind = Unconfirmed.UNWITNESSED
        found.append(Gap(action.id, action.tool_name, action.operation_id, kind))
    return found


def describe(found: Sequence[Gap]) -> str:
    """One sentence per action, for the card, the thread and the audit log."""
    parts = []
    for gap in found:
        name = f"{gap.tool_name} (operation {gap.operation_id})"
        if gap.kind is Unconfirmed.NOT_RUN:
            parts.append(f"{name} was approved but did not run")
        elif gap.kind is Unconfirmed.UNWITNESSED:
            parts.append(f"{name} was approved but nothing shows whether it ran")
        else:
            parts.append(
                f"{name} started but the bot stopped before it finished: whether its effect "
                "happened is unknown, check before asking again"
            )
    return "; ".join(parts) + "."


def record(s: Session, request: ApprovalRequest, *, found: Sequence[Gap]) -> None:
    """One audit event per unconfirmed action, so the log never implies it ran."""
    audit = AuditRepository(s)
    for gap in found:
        audit.record(
            gap.kind.value,
            outcome="error",
            run_id=request.run_id,
            request_id=request.id,
            action_id=gap.action_id,
            team_id=request.team_id,
            detail={"tool": gap.tool_name, "operation_id": gap.operation_id},
        )
