"""A run's end as written in the caller's transaction: by the run's lifecycle at a stop, and by
the resume that ended the run, with the request's own end (one commit: no crash between).

Two steps, because of the order every transaction takes its locks in (request rows, then the
run's row, then the audit chain): a caller that audits more in between writes the row first."""

from __future__ import annotations

from sqlalchemy.orm import Session

from agent_runtime.policy import Policy
from agent_runtime.recording import audit_text
from agent_runtime.views import RunView, run_view
from store.pending_reads import RunRecord
from store.repositories import AuditRepository, RunRepository
from store.statuses import RunStatus


def end_run(s: Session, run_id: str, *, status: RunStatus, text: str) -> RunRecord | None:
    """Write the run's end; the run as it is now, or None if a cancel ended it first
    (cancelled stays cancelled, and its thread was told so). Raises LookupError if it is
    gone."""
    runs = RunRepository(s)
    ended = runs.finish(run_id, status=status, result_text=text)
    if ended is None and runs.status(run_id) is None:
        raise LookupError(f"run {run_id} is gone")
    return ended


def audit_run_end(s: Session, ended: RunRecord, *, policy: Policy) -> RunView:
    """Audit a run's end written by ``end_run``; the run as its thread is to be told."""
    if ended.status == RunStatus.COMPLETED:
        AuditRepository(s).record("run_completed", run_id=ended.id, team_id=ended.team_id)
    else:
        run = RunRepository(s).get(ended.id)
        assert run is not None  # its row was just written, in this transaction
        calls = (a for request in run.requests for a in request.actions)
        AuditRepository(s).record(
            "run_failed",
            outcome="error",
            run_id=ended.id,
            team_id=ended.team_id,
            reason=audit_text(policy, ended.result_text or "", calls),
        )
    return run_view(ended)


def record_run_end(
    s: Session, run_id: str, *, status: RunStatus, text: str, policy: Policy
) -> RunView | None:
    """Both steps at once, for a transaction that writes nothing else."""
    ended = end_run(s, run_id, status=status, text=text)
    return None if ended is None else audit_run_end(s, ended, policy=policy)
