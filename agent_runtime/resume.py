"""Resuming a claimed approval exactly once: verify the checkpoint, validate, resume, record.

The winner of the claim resumes inside the run's thread lock, after checking that the checkpoint
still holds the very interrupt that was decided, with the very actions that were reviewed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from langgraph.types import StateSnapshot
from sqlalchemy import select
from sqlalchemy.orm import Session

from agent_runtime import evidence
from agent_runtime.errors import InvalidDecisions, UnsupportedInterrupt
from agent_runtime.faults import fault_point
from agent_runtime.recording import POLICY_VETO, drift
from agent_runtime.views import approval_view, run_view
from agent_runtime.wire import (
    PendingInterrupt,
    ResumeDecision,
    build_resume,
    pending_interrupts,
    tool_results,
)
from store.models import ApprovalRequest
from store.repositories import ApprovalRepository, AuditRepository, RunRepository

if TYPE_CHECKING:
    from agent_runtime.engine import ApprovalEngine

logger = logging.getLogger(__name__)
EXPIRED_MESSAGE = "approval expired"


def _resume_decisions(request: ApprovalRequest) -> list[ResumeDecision]:
    decisions = []
    for action in request.actions:
        last = action.decisions[-1] if action.decisions else None
        if action.outcome == "approved":
            decisions.append(ResumeDecision(type="approve"))
        elif action.outcome == "edited":
            decisions.append(ResumeDecision(type="edit", edited_args=action.edited_args))
        elif action.outcome == "expired":
            decisions.append(ResumeDecision(type="reject", message=EXPIRED_MESSAGE))
        elif action.outcome == "rejected" and (action.extra or {}).get(POLICY_VETO):
            veto = str((action.extra or {})[POLICY_VETO])
            decisions.append(ResumeDecision(type="reject", message=f"Refused by policy: {veto}"))
        elif action.outcome in ("rejected", "responded") and last is not None:
            decisions.append(ResumeDecision(type=last.type, message=last.message))
        else:
            raise InvalidDecisions(f"{action.tool_name} has no final decision ({action.outcome})")
    return decisions


def resume(
    engine: ApprovalEngine,
    request_id: str,
    *,
    final_status: str = "resolved",
    recovering: bool = False,
) -> None:
    """Resume the thread of a claimed request, once, after checking the checkpoint.
    Only the run id is needed to take the lock; ``resume_locked`` reads the request inside it."""
    with engine.db.transaction() as s:
        run_id = s.scalar(select(ApprovalRequest.run_id).where(ApprovalRequest.id == request_id))
    if run_id is None:
        return
    with engine.locks.hold(run_id):
        resume_locked(engine, request_id, final_status=final_status, recovering=recovering)


def resume_locked(
    engine: ApprovalEngine, request_id: str, *, final_status: str, recovering: bool = False
) -> None:
    """The body of ``resume``, for callers that already hold the run's thread lock.

    ``recovering``: a process that claimed this request died. If the checkpoint no longer waits
    on the interrupt, that process got as far as resuming it: finish what it started (an
    interrupted step is continued; the gate's execution records keep tools from repeating effects),
    then ask the evidence whether each approved action ran before calling the request resolved.
    """
    with engine.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
    if request is None or request.status != "resuming" or request.claimed_by != engine.owner:
        return
    run_id = request.run_id
    fault_point("after_claim")
    before = engine.runtime.state(run_id)
    if before.created_at is None:  # no checkpoint at all: never start the thread afresh
        _finish(engine, request_id, status="invalidated", outcome="the run's thread is gone")
        return
    try:
        pending = _pending(before, request)
    except UnsupportedInterrupt as exc:
        _finish(engine, request_id, status="invalidated", outcome=f"unreadable interrupt: {exc}")
        return
    normalize = engine.runtime.catalog.normalize_or_raw
    problem = drift(request, pending, normalize) if pending is not None else None
    if problem is None and pending is None and not recovering:
        problem = "the run is no longer waiting for this approval"
    approves = any(a.outcome in ("approved", "edited") for a in request.actions)
    changed = request.policy_version != engine.policy.version
    if problem is None and pending is not None and approves and changed:
        # Rejections (and expiry) still go through: refusing under any policy runs nothing.
        problem = f"the approval policy changed since it was decided ({request.policy_version})"
    if problem is not None:
        _finish(engine, request_id, status="invalidated", outcome=problem)
        return
    try:
        with engine.lease_keeper(request_id):
            if pending is not None:
                command = build_resume(pending, _resume_decisions(request))
                engine.runtime.invoke(command, run_id)
            elif before.next and not before.interrupts:
                engine.runtime.invoke(None, run_id)  # finish the interrupted step
    except InvalidDecisions as exc:
        _finish(engine, request_id, status="failed", outcome=f"not resumed: {exc}")
        return
    except Exception as exc:
        logger.exception("resume of %s failed", request_id)
        _finish(engine, request_id, status="failed", outcome=f"{type(exc).__name__}: {exc}")
        engine.fail_run(run_id, f"The agent failed after the decision: {exc}")
        return
    fault_point("after_resume")
    after = engine.runtime.state(run_id)
    if recovering and pending is None:
        found = evidence.gaps(engine.db, request, state=after)
        if found:
            _fail_unconfirmed(engine, request, state=after, found=found)
            return
    _finish(
        engine,
        request_id,
        status=final_status,
        outcome=_summary(request),
        record=lambda s: _record_tool_outcomes(s, request, after),
    )
    engine.advance(run_id, after)


def _fail_unconfirmed(
    engine: ApprovalEngine,
    request: ApprovalRequest,
    *,
    state: StateSnapshot,
    found: list[evidence.Gap],
) -> None:
    """An approved action left no proof of having run: say so everywhere, never "resumed"."""
    text = evidence.describe(found)

    def record(s: Session) -> None:
        _record_tool_outcomes(s, request, state)
        evidence.record(s, request, found=found)

    _finish(engine, request.id, status="failed", outcome=text, record=record)
    engine.fail_run(request.run_id, f"The run was interrupted by a restart: {text}")


def invalidate(engine: ApprovalEngine, request_id: str, *, reason: str) -> None:
    """Close a pending request without resuming it (e.g. the policy changed): the card says
    so and the run's thread is told. One caller wins the claim; the others do nothing."""
    with engine.db.transaction() as s:
        if not ApprovalRepository(s).claim(request_id, owner=engine.owner, lease=engine.lease):
            return
    _finish(engine, request_id, status="invalidated", outcome=reason)
    with engine.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        run = RunRepository(s).get(request.run_id) if request is not None else None
        view = run_view(run) if run is not None else None
    if view is not None:
        engine.post_result(view)


def _record_tool_outcomes(s: Session, request: ApprovalRequest, state: StateSnapshot) -> None:
    """One audit event per reviewed call, with what the tool returned."""
    messages = state.values.get("messages", [])
    results = tool_results(messages, [a.tool_call_id for a in request.actions])
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
                detail={"tool": action.tool_name, "operation_id": action.operation_id, **result},
            )


def _pending(state: StateSnapshot, request: ApprovalRequest) -> PendingInterrupt | None:
    return next(
        (p for p in pending_interrupts(state.interrupts) if p.interrupt_id == request.interrupt_id),
        None,
    )


def _summary(request: ApprovalRequest) -> str:
    return ", ".join(f"{a.tool_name}: {a.outcome}" for a in request.actions)


def _finish(
    engine: ApprovalEngine,
    request_id: str,
    *,
    status: str,
    outcome: str,
    record: Callable[[Session], None] | None = None,
) -> None:
    with engine.db.transaction() as s:
        # Lock order everywhere: the request's row first, then the audit chain.
        request = ApprovalRepository(s).get(request_id, for_update=True)
        assert request is not None
        ApprovalRepository(s).finish(request, status=status, outcome=outcome)
        if record is not None:
            record(s)
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
    fault_point("before_card_update")
    engine.show_card(view)
