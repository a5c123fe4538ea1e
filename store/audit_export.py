"""Writing the audit log as JSON lines or CSV, streamed so a large log needs little memory."""

from __future__ import annotations

import csv
import datetime as dt
import json
from typing import TextIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.audit_chain import CHAIN_FIELDS
from store.models import AuditEvent

FIELDS = ("id", "shard", *CHAIN_FIELDS, "prev_hash", "hash")


def export(session: Session, out: TextIO, *, fmt: str = "jsonl", batch: int = 5000) -> int:
    """Rows, not ORM objects, streamed in batches: a million events need little memory."""
    table = AuditEvent.__table__
    stmt = select(*(table.c[name] for name in FIELDS)).order_by(table.c.id)
    writer = csv.DictWriter(out, fieldnames=FIELDS) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    count = 0
    for row in session.execute(stmt.execution_options(yield_per=batch)).mappings():
        record = dict(row)
        record["created_at"] = _iso(record["created_at"])
        if writer is not None:
            writer.writerow({**record, "detail": json.dumps(record["detail"], ensure_ascii=False)})
        else:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count


def _iso(value: dt.datetime) -> str:
    aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return aware.astimezone(dt.UTC).isoformat()
