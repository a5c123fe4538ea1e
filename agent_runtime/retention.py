"""Retention: delete finished runs' checkpoints; the runs, decisions and audit log stay."""

from __future__ import annotations

import datetime as dt

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import select

from store.db import Database
from store.models import ApprovalRequest, Run, utcnow
from store.repositories import AuditRepository


def prune_checkpoints(
    db: Database, checkpointer: BaseCheckpointSaver, *, older_than: dt.timedelta
) -> int:
    cutoff = utcnow() - older_than
    open_requests = select(ApprovalRequest.run_id).where(
        ApprovalRequest.status.in_(("pending", "resuming"))
    )
    with db.transaction() as s:
        finished = list(
            s.scalars(
                select(Run.id).where(
                    Run.status.in_(("completed", "failed")),
                    Run.updated_at <= cutoff,
                    Run.id.not_in(open_requests),
                )
            )
        )
    for run_id in finished:
        checkpointer.delete_thread(run_id)
    with db.transaction() as s:
        AuditRepository(s).record(
            "checkpoints_pruned",
            detail={"runs": len(finished), "finished_before": cutoff.isoformat()},
        )
    return len(finished)
