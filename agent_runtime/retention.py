"""Retention: delete finished runs' checkpoints; the runs, decisions and audit log stay."""

from __future__ import annotations

import datetime as dt

from langgraph.checkpoint.base import BaseCheckpointSaver

from store.db import Database
from store.maintenance import MaintenanceQueries
from store.models import utcnow
from store.repositories import AuditRepository


def prune_checkpoints(
    db: Database, checkpointer: BaseCheckpointSaver, *, older_than: dt.timedelta
) -> int:
    cutoff = utcnow() - older_than
    with db.transaction() as s:
        finished = MaintenanceQueries(s).finished_runs(before=cutoff)
    for run_id in finished:
        checkpointer.delete_thread(run_id)
    with db.transaction() as s:
        AuditRepository(s).record(
            "checkpoints_pruned",
            detail={"runs": len(finished), "finished_before": cutoff.isoformat()},
        )
    return len(finished)
