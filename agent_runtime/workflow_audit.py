"""Lets a workflow write its own events (e.g. what was published, on which verdict) to the
audit log, attributed to the run whose thread it runs in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from store.db import Database
from store.repositories import AuditRepository


class WorkflowAudit(Protocol):
    def __call__(self, config: Mapping[str, Any], kind: str, detail: dict[str, Any]) -> None: ...


def workflow_audit(db: Database) -> WorkflowAudit:
    def record(config: Mapping[str, Any], kind: str, detail: dict[str, Any]) -> None:
        run_id = (config.get("configurable") or {}).get("thread_id")
        with db.transaction() as s:
            AuditRepository(s).record(kind, run_id=str(run_id) if run_id else None, detail=detail)

    return record
