"""The audit log's models: its events, in chains, and each chain's head.

Audit events are append-only: repositories offer no way to change or delete them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from store.models import Base, utcnow


class AuditEvent(Base):
    __tablename__ = "audit_events"

    # 64-bit on PostgreSQL (migration 0018); SQLite's rowid alias must be spelled INTEGER.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    kind: Mapped[str] = mapped_column(String(48))
    outcome: Mapped[str] = mapped_column(String(16), default="info")
    actor_id: Mapped[str | None] = mapped_column(String(32))
    team_id: Mapped[str | None] = mapped_column(String(32))
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    request_id: Mapped[str | None] = mapped_column(String(64), index=True)
    action_id: Mapped[str | None] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    prev_hash: Mapped[str] = mapped_column(String(64), default="")
    hash: Mapped[str] = mapped_column(String(64), default="")
    shard: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


AUDIT_SHARDS = 16
"""The audit log is this many chains, each with its own head, so appends for different runs do
not take turns. Fixed: a migration that changes it must re-anchor every head."""


class AuditHead(Base):
    """A chain's anchor, one row per shard (``id``), advanced in the same transaction as every
    append to it: removing its newest events (or all of them) leaves it pointing past the end.

    ``keyed_from`` is the position (1-based) of the first event chained with AUDIT_KEY; events
    before it were written unkeyed and are sealed by the first keyed link. ``mac`` covers the
    other fields with AUDIT_KEY, and is empty while the log is unkeyed."""

    __tablename__ = "audit_head"
    __table_args__ = (
        CheckConstraint(f"id >= 0 AND id < {AUDIT_SHARDS}", name="ck_audit_head_shard"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    event_count: Mapped[int] = mapped_column(Integer, default=0)
    last_event_id: Mapped[int | None] = mapped_column(BigInteger)
    last_hash: Mapped[str] = mapped_column(String(64), default="")
    keyed_from: Mapped[int | None] = mapped_column(Integer)
    mac: Mapped[str] = mapped_column(String(64), default="")
