"""What the gate's tests share: a call's run, a run's request put in the state a resume holds
it in, and the refusals the audit log kept."""

from __future__ import annotations

from sqlalchemy import select

from agent_runtime.gate import BLOCKED_EVENT
from store.audit_models import AuditEvent
from store.models import ApprovalRequest

SEND_ARGS = {"recipient": "a@example.com", "text": "hi"}


def config(run_id: str) -> dict:
    return {"configurable": {"thread_id": run_id}}


def resuming(env, run_id: str) -> None:  # type: ignore[no-untyped-def]
    """Put the run's request in the state a resume holds it in, as the engine's claim does."""
    with env.db.transaction() as s:
        for request in s.scalars(select(ApprovalRequest).where(ApprovalRequest.run_id == run_id)):
            request.status = "resuming"


def approved_and_resuming(env, run_id: str) -> None:  # type: ignore[no-untyped-def]
    """The run's one action approved and its request being resumed, as a resume holds it."""
    with env.db.transaction() as s:
        s.scalars(select(ApprovalRequest)).one().actions[0].outcome = "approved"
    resuming(env, run_id)


def blocked(env) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == BLOCKED_EVENT)))
