"""Writing the audit log as JSON lines or CSV, streamed so a large log needs little memory."""

from __future__ import annotations

import csv
import json
from typing import Any, TextIO

from sqlalchemy.orm import Session

from store.models import AuditEvent
from store.repositories import AuditRepository

FIELDS = (
    "id",
    "created_at",
    "kind",
    "outcome",
    "actor_id",
    "team_id",
    "run_id",
    "request_id",
    "action_id",
    "reason",
    "detail",
)


def event_row(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "created_at": event.created_at.isoformat(),
        "kind": event.kind,
        "outcome": event.outcome,
        "actor_id": event.actor_id,
        "team_id": event.team_id,
        "run_id": event.run_id,
        "request_id": event.request_id,
        "action_id": event.action_id,
        "reason": event.reason,
        "detail": event.detail,
    }


def export(session: Session, out: TextIO, *, fmt: str = "jsonl") -> int:
    count = 0
    writer = csv.DictWriter(out, fieldnames=FIELDS) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    for event in AuditRepository(session).iter_all():
        row = event_row(event)
        if writer is not None:
            writer.writerow({**row, "detail": json.dumps(row["detail"], ensure_ascii=False)})
        else:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    return count
