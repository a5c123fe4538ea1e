"""Retention: delete finished runs' checkpoints and finished inbox items; the runs, decisions
and audit log stay."""

from __future__ import annotations

import datetime as dt

from langgraph.checkpoint.base import BaseCheckpointSaver

from store.db import Database
from store.inbox import InboxRepository
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


def prune_inbox(db: Database, *, older_than: dt.timedelta) -> int:
    """Stored clicks worked on (done or failed) before the cutoff: what they led to is in the
    decisions and the audit log, and the clicks hold reasons and edited arguments."""
    cutoff = utcnow() - older_than
    with db.transaction() as s:
        count = InboxRepository(s).prune(finished_before=cutoff)
        AuditRepository(s).record(
            "inbox_pruned", detail={"items": count, "finished_before": cutoff.isoformat()}
        )
    return count
