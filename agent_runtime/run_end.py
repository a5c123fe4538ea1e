"""A run's end as written in the caller's transaction: by the run's lifecycle at a stop, and by
the resume that ended the run, with the request's own end (one commit: no crash between).

A run ends once, and nothing of it stays open: its approvals still pending are closed in the
same commit (a card left with its buttons on a run that has ended could still be clicked).

Two steps, because of the order every transaction takes its locks in (request rows, then the
run's row, then the audit chain): a caller that audits more in between writes the rows first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from agent_runtime.policy import Policy
from agent_runtime.recording import POLICY_VETO, audit_text
from agent_runtime.resume_records import audit_request_end
from agent_runtime.views import ApprovalView, RunView, approval_view, run_view
from store.models import Action, ApprovalRequest, Run
from store.pending_reads import RunRecord
from store.repositories import ApprovalRepository, AuditRepository, RunRepository
from store.request_end import Closed
from store.run_history import RunHistory
from store.statuses import FINISHED_RUN, RequestStatus, RunStatus

CLOSED_WITH_RUN = "its run ended before this was decided; nothing of it ran"


@dataclass(frozen=True)
class RunEnd:
    """A run's end as written: the run now, and its approvals that were closed with it."""

    run: RunRecord
    closed: tuple[ApprovalRequest, ...] = ()


@dataclass(frozen=True)
class Told:
    """What people are to see of a run's end: its thread's line, and the cards it closed."""

    run: RunView
    cards: tuple[ApprovalView, ...] = ()


def lock_pending(s: Session, run_id: str) -> list[ApprovalRequest]:
    """The run's pending approvals, their rows locked (before the run's row, but at a stop,
    which holds the run's row already: see ``RunLifecycle``)."""
    return ApprovalRepository(s).lock_open_of_run(run_id, statuses=(RequestStatus.PENDING,))


def close_unresumed(s: Session, requests: list[ApprovalRequest]) -> None:
    """Close approvals, locked by ``lock_pending``, whose run has ended."""
    for request in requests:
        ApprovalRepository(s).finish(
            request, status=RequestStatus.INVALIDATED, outcome=CLOSED_WITH_RUN
        )


def end_run(s: Session, run_id: str, *, status: RunStatus, text: str) -> RunEnd | None:
    """Write the run's end, with its pending approvals closed; None if it had ended already (a
    cancel, or another end, stands: its thread was told that). Raises LookupError if it is
    gone."""
    closing = lock_pending(s, run_id)
    ended = RunRepository(s).finish(run_id, status=status, result_text=text)
    return _with_the_rest(s, run_id, ended, lambda: closing)


def ended_with(s: Session, closed: Closed, run_id: str) -> RunEnd | None:
    """The run's end that its request's close wrote (``ApprovalRepository.close`` with
    ``run_end``), with the run's other pending approvals, which that close locked, closed."""
    others = closed.others
    return _with_the_rest(s, run_id, closed.run, lambda: ApprovalRepository(s).load_locked(others))


def _with_the_rest(
    s: Session,
    run_id: str,
    ended: RunRecord | None,
    closing: Callable[[], list[ApprovalRequest]],
) -> RunEnd | None:
    if ended is None:
        if RunRepository(s).status(run_id) is None:
            raise LookupError(f"run {run_id} is gone")
        return None
    closed = closing()
    close_unresumed(s, closed)
    return RunEnd(ended, tuple(closed))


def audit_closed(
    s: Session, closed: Sequence[ApprovalRequest], *, run: RunView
) -> tuple[ApprovalView, ...]:
    """Audit the approvals a run's end closed; their cards as they are to be drawn now."""
    audit = AuditRepository(s)
    for request in closed:
        audit.record(
            "invalidated",
            outcome="error",  # as every invalidation: nothing of it ran
            run_id=request.run_id,
            request_id=request.id,
            team_id=request.team_id,
            reason=CLOSED_WITH_RUN,
        )
    return tuple(replace(approval_view(r), run=run) for r in closed)


def audit_run_end(
    s: Session, ended: RunEnd, *, policy: Policy, with_run_event: bool = True
) -> Told:
    """Audit a run's end written by ``end_run`` (without the run's own event when the
    caller's says why); what its thread and cards are to be told."""
    record = ended.run
    if with_run_event and record.status == RunStatus.COMPLETED:
        AuditRepository(s).record("run_completed", run_id=record.id, team_id=record.team_id)
    elif with_run_event:
        run = RunRepository(s).get(record.id)
        assert run is not None  # its row was just written, in this transaction
        calls = (a for request in run.requests for a in request.actions)
        AuditRepository(s).record(
            "run_failed",
            outcome="error",
            run_id=record.id,
            team_id=record.team_id,
            reason=audit_text(policy, record.result_text or "", calls),
        )
    view = run_view(record)
    return Told(view, audit_closed(s, ended.closed, run=view))


def fail_at_stop(
    s: Session,
    run: Run,
    request: ApprovalRequest,
    *,
    reason: str,
    others: list[ApprovalRequest],
    policy: Policy,
) -> Told:
    """Fail a run where it stopped (its row locked), with the request just recorded there and
    its other pending approvals (locked by ``lock_pending``) closed unresumed."""
    ApprovalRepository(s).finish(request, status=RequestStatus.INVALIDATED, outcome=reason)
    RunRepository(s).set_status(run, RunStatus.FAILED, result_text=reason)
    close_unresumed(s, others)
    audit_request_end(s, request, status=RequestStatus.INVALIDATED, outcome=reason, policy=policy)
    AuditRepository(s).record(
        "run_failed", outcome="error", run_id=run.id, team_id=run.team_id, reason=reason
    )
    view = run_view(run)
    return Told(view, audit_closed(s, others, run=view))


def close_left_open(s: Session, run_id: str) -> tuple[ApprovalView, ...]:
    """Close the pending approvals of a run that ended without closing them (by an older
    version); their cards as they are to be drawn now."""
    closing = lock_pending(s, run_id)
    run = RunRepository(s).get(run_id, for_update=True)
    if run is None or run.status not in FINISHED_RUN or not closing:
        return ()
    close_unresumed(s, closing)
    return audit_closed(s, closing, run=run_view(run))


def record_run_end(
    s: Session, run_id: str, *, status: RunStatus, text: str, policy: Policy
) -> Told | None:
    """Both steps at once, for a transaction that writes nothing else."""
    ended = end_run(s, run_id, status=status, text=text)
    return None if ended is None else audit_run_end(s, ended, policy=policy)


@dataclass(frozen=True)
class Stopping:
    refused: int
    """Proposals refused by the policy in a row."""
    others: list[ApprovalRequest]
    """The run's other pending approvals, their rows locked."""


def refused_too_often(
    s: Session, request: ApprovalRequest, actions: list[Action], *, limit: int
) -> Stopping | None:
    """Past ``limit`` proposals in a row with a call the policy refused (however many calls
    each), the run is stopped: each refusal is answered at once, so an agent that keeps
    proposing such calls would loop for ever. If so, its other pending approvals are locked
    now, to be closed with it.

    Their rows are locked after the run's, against the usual order, but before the audit
    chain: every other end of a run holds its thread lock too, and a decision, which locks
    one of them, locks no run row."""
    if not any(POLICY_VETO in (a.extra or {}) for a in actions):
        return None
    refused = RunHistory(s).refused_in_a_row(request.run_id, marked=POLICY_VETO)
    if refused <= limit:
        return None
    others = [r for r in lock_pending(s, request.run_id) if r.id != request.id]
    return Stopping(refused, others)
