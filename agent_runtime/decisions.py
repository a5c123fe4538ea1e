"""Recording decisions and resuming exactly once. ``ApprovalEngine`` delegates here.

Exactly once rests on two things: the move pending -> resuming is a conditional update taken in
the same transaction (and row lock) that records the last required decision, so one caller wins;
and the winner resumes inside a per-thread lock after checking that the checkpoint still holds
the very interrupt that was decided, with the very actions that were reviewed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_runtime.authorization import ActionFacts, Actor, Refusal, check_decision, outcome_after
from agent_runtime.errors import InvalidDecisions, UnsupportedInterrupt
from agent_runtime.recording import drift
from agent_runtime.views import ApprovalView, approval_view
from agent_runtime.wire import ResumeDecision, build_resume, pending_interrupts, tool_results
from store.models import Action, ApprovalRequest
from store.repositories import (
    ApprovalRepository,
    AuditRepository,
    DecisionRepository,
    RunRepository,
)

if TYPE_CHECKING:
    from agent_runtime.engine import ApprovalEngine

logger = logging.getLogger(__name__)
EXPIRED_MESSAGE = "approval expired"


@dataclass(frozen=True)
class DecisionResult:
    refusal: Refusal | None
    approval: ApprovalView | None = None
    completed: bool = False


def _facts(request: ApprovalRequest, action: Action) -> ActionFacts:
    approvers = frozenset(
        d.reviewer_id
        for d in action.decisions
        if d.type in ("approve", "edit") and d.action_hash == action.action_hash
    )
    return ActionFacts(
        request_status=request.status,
        team_id=request.team_id,
        requester_id=request.requester_id,
        expires_at=request.expires_at,
        outcome=action.outcome,
        allowed_decisions=tuple(action.allowed_decisions),
        approver_roles=tuple(action.approver_roles),
        self_approval=action.self_approval,
        approvers_so_far=approvers,
    )


def check(engine: ApprovalEngine, *, action_id: str, actor: Actor, decision: str) -> Refusal | None:
    """A read-only pre-check, e.g. before opening a modal; ``record`` checks again."""
    with engine.db.transaction() as s:
        action = ApprovalRepository(s).get_action(action_id)
        if action is None:
            return Refusal.UNKNOWN_APPROVAL
        return check_decision(
            engine.policy,
            _facts(action.request, action),
            actor,
            decision,
            now=engine.clock(),
            usergroup_members=engine.usergroup_members,
        )


def record(
    engine: ApprovalEngine, *, action_id: str, actor: Actor, decision: str, message: str | None
) -> DecisionResult:
    """Authorize and record one decision; claim the request if it was the last one needed."""
    with engine.db.transaction() as s:
        audit = AuditRepository(s)
        repos = ApprovalRepository(s)
        found = repos.get_action(action_id)
        request = repos.get(found.request_id, for_update=True) if found else None
        action = next((a for a in request.actions if a.id == action_id), None) if request else None
        if request is None or action is None:
            refusal: Refusal | None = Refusal.UNKNOWN_APPROVAL
        else:
            s.refresh(request)
            refusal = check_decision(
                engine.policy,
                _facts(request, action),
                actor,
                decision,
                now=engine.clock(),
                usergroup_members=engine.usergroup_members,
            )
            if (
                refusal is None
                and decision in ("reject", "respond")
                and not (message or "").strip()
            ):
                refusal = Refusal.REASON_REQUIRED
        ids = {"request_id": request.id if request else None, "action_id": action_id}
        run_id = request.run_id if request else None
        if refusal is not None:
            audit.record(
                "decision_refused",
                outcome="refused",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=run_id,
                reason=refusal.value,
                detail={"decision": decision},
                **ids,
            )
            return DecisionResult(refusal=refusal)
        assert request is not None and action is not None
        approvers = _facts(request, action).approvers_so_far | {actor.user_id}
        DecisionRepository(s).add(
            action,
            reviewer_id=actor.user_id,
            team_id=actor.team_id,
            type_=decision,
            message=message,
        )
        action.outcome = outcome_after(
            decision,
            distinct_approvers=len(approvers),
            approvals_required=action.approvals_required,
        )
        audit.record(
            "decision_recorded",
            outcome="allowed",
            actor_id=actor.user_id,
            team_id=actor.team_id,
            run_id=run_id,
            detail={
                "decision": decision,
                "message": message,
                "action_hash": action.action_hash,
                "outcome": action.outcome,
            },
            **ids,
        )
        completed = all(a.outcome for a in request.actions)
        if completed and repos.claim(request.id, owner=engine.owner, lease=engine.lease):
            request.status = "resuming"
            audit.record(
                "resume_claimed",
                run_id=run_id,
                request_id=request.id,
                detail={"owner": engine.owner},
            )
        return DecisionResult(refusal=None, approval=approval_view(request), completed=completed)


def _resume_decisions(request: ApprovalRequest) -> list[ResumeDecision]:
    decisions = []
    for action in request.actions:
        last = action.decisions[-1] if action.decisions else None
        if action.outcome == "approved":
            decisions.append(ResumeDecision(type="approve"))
        elif action.outcome == "expired":
            decisions.append(ResumeDecision(type="reject", message=EXPIRED_MESSAGE))
        elif action.outcome in ("rejected", "responded") and last is not None:
            decisions.append(ResumeDecision(type=last.type, message=last.message))
        else:
            raise InvalidDecisions(f"{action.tool_name} has no final decision ({action.outcome})")
    return decisions


def resume(engine: ApprovalEngine, request_id: str, *, final_status: str = "resolved") -> None:
    """Resume the thread of a claimed request, once, after checking the checkpoint."""
    with engine.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
    if request is None or request.status != "resuming":
        return
    with engine.locks.hold(request.run_id):
        resume_locked(engine, request_id, final_status=final_status)


def resume_locked(engine: ApprovalEngine, request_id: str, *, final_status: str) -> None:
    """The body of ``resume``, for callers that already hold the run's thread lock."""
    with engine.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
    if request is None or request.status != "resuming":
        return
    run_id = request.run_id
    problem = _verify_checkpoint(engine, request)
    if problem is not None:
        _finish(engine, request_id, status="invalidated", outcome=problem)
        return
    try:
        command = build_resume(_pending(engine, request), _resume_decisions(request))
    except InvalidDecisions as exc:
        _finish(engine, request_id, status="failed", outcome=f"not resumed: {exc}")
        return
    try:
        engine.runtime.invoke(command, run_id)
    except Exception as exc:
        logger.exception("resume of %s failed", request_id)
        _finish(engine, request_id, status="failed", outcome=f"{type(exc).__name__}: {exc}")
        engine._fail_run(run_id, f"The agent failed after the decision: {exc}")
        return
    _record_tool_outcomes(engine, request)
    _finish(engine, request_id, status=final_status, outcome=_summary(request))
    engine._advance(run_id)


def _record_tool_outcomes(engine: ApprovalEngine, request: ApprovalRequest) -> None:
    messages = engine.runtime.state(request.run_id).values.get("messages", [])
    results = tool_results(messages, [a.tool_call_id for a in request.actions])
    with engine.db.transaction() as s:
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
                detail={"tool": action.tool_name, "operation_id": action.operation_id, **result},
            )


def _pending(engine: ApprovalEngine, request: ApprovalRequest):  # type: ignore[no-untyped-def]
    state = engine.runtime.state(request.run_id)
    return next(
        (p for p in pending_interrupts(state.interrupts) if p.interrupt_id == request.interrupt_id),
        None,
    )


def _verify_checkpoint(engine: ApprovalEngine, request: ApprovalRequest) -> str | None:
    """Invariant 4 and 6: the thread must still wait on this interrupt, with these actions."""
    try:
        pending = _pending(engine, request)
    except UnsupportedInterrupt as exc:
        return f"the run's pending interrupt cannot be read: {exc}"
    if pending is None:
        return "the run is no longer waiting for this approval"
    return drift(request, pending)


def _summary(request: ApprovalRequest) -> str:
    return ", ".join(f"{a.tool_name}: {a.outcome}" for a in request.actions)


def _finish(engine: ApprovalEngine, request_id: str, *, status: str, outcome: str) -> None:
    with engine.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        ApprovalRepository(s).finish(request, status=status, outcome=outcome)
        if status == "invalidated":
            run = RunRepository(s).get(request.run_id)
            if run is not None:
                RunRepository(s).set_status(run, "failed", result_text=outcome)
        kind = {"resolved": "resumed", "expired": "resumed", "invalidated": "invalidated"}.get(
            status, "resume_failed"
        )
        AuditRepository(s).record(
            kind,
            outcome="info" if kind == "resumed" else "error",
            run_id=request.run_id,
            request_id=request_id,
            team_id=request.team_id,
            reason=outcome,
        )
        view = approval_view(request)
    engine.notifier.approval_updated(view)
