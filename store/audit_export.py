"""Writing the audit log as JSON lines or CSV, streamed so a large log needs little memory."""

from __future__ import annotations

import csv
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, TextIO

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from store.audit_chain import CHAIN_FIELDS
from store.audit_models import AuditEvent

FIELDS = ("id", "shard", *CHAIN_FIELDS, "prev_hash", "hash")


@dataclass(frozen=True)
class ExportFilter:
    """Which events an auditor asked for; unset fields match everything."""

    run_id: str | None = None
    actor_id: str | None = None
    tool: str | None = None
    """Events about this tool: its calls, decisions, outcomes and blocked attempts."""
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def clauses(self) -> list[ColumnElement[bool]]:
        table = AuditEvent.__table__
        found: list[ColumnElement[bool]] = []
        if self.run_id is not None:
            found.append(table.c.run_id == self.run_id)
        if self.actor_id is not None:
            found.append(table.c.actor_id == self.actor_id)
        if self.since is not None:
            found.append(table.c.created_at >= self.since)
        if self.until is not None:
            found.append(table.c.created_at < self.until)
        return found

    def about_tool(self, detail: dict[str, Any] | None) -> bool:
        """The tool is named in the event's detail (the JSON is read here, alike on SQLite and
        PostgreSQL)."""
        if self.tool is None:
            return True
        detail = detail or {}
        named = {detail.get("tool")} | {
            a.get("tool") for a in detail.get("actions") or [] if isinstance(a, dict)
        }
        return self.tool in named


def export(
    session: Session,
    out: TextIO,
    *,
    fmt: str = "jsonl",
    batch: int = 5000,
    only: ExportFilter | None = None,
) -> int:
    """Rows, not ORM objects, streamed in batches: a million events need little memory."""
    only = only or ExportFilter()
    table = AuditEvent.__table__
    stmt = select(*(table.c[name] for name in FIELDS)).where(*only.clauses()).order_by(table.c.id)
    writer = csv.DictWriter(out, fieldnames=FIELDS) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    count = 0
    for row in session.execute(stmt.execution_options(yield_per=batch)).mappings():
        if not only.about_tool(row["detail"]):
            continue
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
