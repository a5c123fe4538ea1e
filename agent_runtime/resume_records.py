"""What a resume sends the thread and what it records: each reviewed call's final decision as
the thread's resume value, one audit event per call with what its tool returned, the
request's outcome in one line, and the audit event of the request's end."""

from __future__ import annotations

from sqlalchemy.orm import Session

from agent_runtime.call_identity import kept_call_id
from agent_runtime.errors import InvalidDecisions
from agent_runtime.policy import Policy
from agent_runtime.recording import POLICY_VETO, audit_text
from agent_runtime.revisions import rejection_for_agent, revisions_left
from agent_runtime.runtime import ThreadStop
from agent_runtime.wire import MESSAGES, ResumeDecision, tool_results
from store.models import ApprovalRequest
from store.repositories import AuditRepository
from store.statuses import ActionOutcome, RequestStatus

EXPIRED_MESSAGE = "approval expired"


def resume_decisions(request: ApprovalRequest, policy: Policy) -> list[ResumeDecision]:
    decisions = []
    for action in request.actions:
        last = action.decisions[-1] if action.decisions else None
        veto = (action.extra or {}).get(POLICY_VETO)
        if action.outcome == ActionOutcome.APPROVED:
            decisions.append(ResumeDecision(type="approve"))
        elif action.outcome == ActionOutcome.EDITED:
            decisions.append(ResumeDecision(type="edit", edited_args=action.edited_args))
        elif action.outcome == ActionOutcome.EXPIRED:
            decisions.append(ResumeDecision(type="reject", message=EXPIRED_MESSAGE))
        elif action.outcome == ActionOutcome.REJECTED and veto:
            decisions.append(ResumeDecision(type="reject", message=f"Refused by policy: {veto}"))
        elif action.outcome == ActionOutcome.REJECTED and last:
            message = rejection_for_agent(
                tool_name=action.tool_name,
                reason=last.message or "",
                revisions_left=revisions_left(action, policy),
            )
            decisions.append(ResumeDecision(type=last.type, message=message))
        elif action.outcome == ActionOutcome.RESPONDED and last:
            decisions.append(ResumeDecision(type=last.type, message=last.message))
        else:
            raise InvalidDecisions(f"{action.tool_name} has no final decision ({action.outcome})")
    return decisions


def record_tool_outcomes(
    s: Session, request: ApprovalRequest, state: ThreadStop, *, policy: Policy
) -> None:
    """One audit event per reviewed call, with what the tool returned (a result, or a reject's
    reason, may quote an argument the policy keeps out of the audit)."""
    messages = state.values.get(MESSAGES, [])
    results = tool_results(messages, [a.tool_call_id for a in request.actions], kept=kept_call_id)
    if results:
        audit = AuditRepository(s)
        for action in request.actions:
            result = results.get(action.tool_call_id or "")
            if result is None:
                continue
            audit.record(
                "tool_outcome",
                outcome="error" if result["status"] == "error" else "info",
                run_id=request.run_id,
                request_id=request.id,
                action_id=action.id,
                team_id=request.team_id,
                detail={
                    "tool": action.tool_name,
                    "operation_id": action.operation_id,
                    **result,
                    "preview": policy.rule_for(action.tool_name).redacted_text(
                        result["preview"], action.args, action.edited_args
                    ),
                },
            )


def summary(request: ApprovalRequest) -> str:
    return ", ".join(f"{a.tool_name}: {a.outcome}" for a in request.actions)


_AUDITED = {
    RequestStatus.RESOLVED: "resumed",
    RequestStatus.EXPIRED: "resumed",
    RequestStatus.INVALIDATED: "invalidated",
    RequestStatus.CANCELLED: "request_cancelled",
}
_AUDITED_OK = (RequestStatus.RESOLVED, RequestStatus.EXPIRED, RequestStatus.CANCELLED)


def audit_request_end(
    s: Session, request: ApprovalRequest, *, status: RequestStatus, outcome: str, policy: Policy
) -> None:
    """The request's end as the audit keeps it: the outcome, without what the policy redacts."""
    AuditRepository(s).record(
        _AUDITED.get(status, "resume_failed"),
        outcome="info" if status in _AUDITED_OK else "error",
        run_id=request.run_id,
        request_id=request.id,
        team_id=request.team_id,
        reason=audit_text(policy, outcome, request.actions),
    )
