"""Lets a workflow write its own events (e.g. what was published, on which verdict) to the
audit log, attributed to the run whose thread it runs in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agent_runtime.call_identity import thread_of
from store.db import Database
from store.repositories import AuditRepository


class WorkflowAudit(Protocol):
    def __call__(self, config: Mapping[str, Any], kind: str, detail: dict[str, Any]) -> None: ...


def workflow_audit(db: Database) -> WorkflowAudit:
    def record(config: Mapping[str, Any], kind: str, detail: dict[str, Any]) -> None:
        with db.transaction() as s:
            AuditRepository(s).record(kind, run_id=thread_of(config), detail=detail)

    return record
