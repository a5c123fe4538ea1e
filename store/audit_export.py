"""Writing the audit log as JSON lines or CSV, streamed so a large log needs little memory."""

from __future__ import annotations

import csv
import json
from typing import Any, TextIO

from sqlalchemy.orm import Session

from store.audit_chain import CHAIN_FIELDS
from store.models import AuditEvent
from store.repositories import AuditRepository

FIELDS = ("id", *CHAIN_FIELDS, "prev_hash", "hash")


def event_row(event: AuditEvent) -> dict[str, Any]:
    """One exported event, with the chain hashes so the export can be checked elsewhere."""
    row = {name: getattr(event, name) for name in FIELDS}
    row["created_at"] = event.created_at.isoformat()
    return row


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
