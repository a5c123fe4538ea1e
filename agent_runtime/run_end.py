"""A run's end as written in the caller's transaction: by the run's lifecycle at a stop, and by
the resume that ended the run, with the request's own end (one commit: no crash between)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from agent_runtime.policy import Policy
from agent_runtime.recording import audit_text
from agent_runtime.views import RunView, run_view
from store.repositories import AuditRepository, RunRepository
from store.statuses import RunStatus


def record_run_end(
    s: Session, run_id: str, *, status: RunStatus, text: str, policy: Policy
) -> RunView | None:
    """Record the run's end and audit it; the run as its thread is to be told, or None if a
    cancel ended it first (its thread was told so). Raises LookupError if it is gone."""
    runs = RunRepository(s)
    ended = runs.finish(run_id, status=status, result_text=text)
    if ended is None:
        if runs.status(run_id) is None:
            raise LookupError(f"run {run_id} is gone")
        return None  # cancelled stays cancelled
    if status == RunStatus.COMPLETED:
        AuditRepository(s).record("run_completed", run_id=run_id, team_id=ended.team_id)
    else:
        run = runs.get(run_id)
        assert run is not None  # its row was just written, in this transaction
        calls = (a for request in run.requests for a in request.actions)
        AuditRepository(s).record(
            "run_failed",
            outcome="error",
            run_id=run_id,
            team_id=ended.team_id,
            reason=audit_text(policy, text, calls),
        )
    return run_view(ended)
