"""Helpers for the audit log tests: a store, appends, and an intruder behind the triggers.

The intruder goes behind the bot's back the way someone with database access (or the owner)
could: on PostgreSQL with triggers switched off (``session_replication_role = replica``), on
SQLite by dropping them. Nothing here knows the operator's key unless it is the bot.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy import JSON, Connection, column, select, table, update

from store.audit_chain import ChainReport, digest, head_mac
from store.audit_models import AUDIT_SHARDS, AuditEvent, AuditHead
from store.db import Database
from store.migrate import upgrade
from store.models import utcnow
from store.repositories import AuditRepository

KEY = b"the operator's AUDIT_KEY, 32+ chars"
INTRUDER_KEY = b"a key of the intruder's own, 32+ chars"


def open_store(url: str, key: bytes | None = KEY) -> Database:
    db = Database(url, audit_key=key)
    upgrade(db.engine, audit_key=key)
    return db


def append(db: Database, *kinds: str) -> None:
    for kind in kinds:
        with db.transaction() as s:
            AuditRepository(s).record(kind, actor_id="U1", detail={"kind": kind})


OLD_EVENTS = table(
    "audit_events",
    *(column(name) for name in ("kind", "outcome", "run_id", "created_at", "prev_hash", "hash")),
    column("detail", JSON),
)
"""``audit_events`` as a release before the shards wrote it."""


def old_append(conn: Connection, kind: str, *, prev: str, run_id: str | None = None) -> str:
    """Append an unkeyed event the way a single-chain release did; returns its hash."""
    event = AuditEvent(kind=kind, outcome="info", run_id=run_id, detail={}, created_at=utcnow())
    link = digest(prev, event)
    values = {c: getattr(event, c) for c in ("kind", "outcome", "run_id", "detail", "created_at")}
    conn.execute(OLD_EVENTS.insert().values(**values, prev_hash=prev, hash=link))
    return link


def check(db: Database) -> ChainReport:
    with db.transaction() as s:
        return AuditRepository(s).verify()


@contextlib.contextmanager
def behind_the_triggers(db: Database) -> Iterator[Connection]:
    """A connection on which the append-only triggers do not fire."""
    with db.engine.begin() as conn:
        if db.is_sqlite:
            names = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            for (name,) in list(names):
                conn.exec_driver_sql(f"DROP TRIGGER {name}")
        else:
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        yield conn


def recompute(conn: Connection, *, key: bytes | None) -> None:
    """Relink every chain with the public algorithm (keyed with ``key`` if given) and write
    heads to match: the best an intruder can do."""
    table = AuditEvent.__table__
    rows = conn.execute(select(table).order_by(table.c.id)).mappings().all()
    for shard in range(AUDIT_SHARDS):
        prev, last_id, count = "", None, 0
        for row in (row for row in rows if row["shard"] == shard):
            link = digest(prev, AuditEvent(**dict(row)), key=key)
            conn.execute(
                update(AuditEvent)
                .where(AuditEvent.id == row["id"])
                .values(prev_hash=prev, hash=link)
            )
            prev, last_id, count = link, row["id"], count + 1
        head = AuditHead(
            id=shard,
            event_count=count,
            last_event_id=last_id,
            last_hash=prev,
            keyed_from=1 if key else None,
        )
        mac = head_mac(head, key) if key else ""
        conn.execute(
            update(AuditHead)
            .where(AuditHead.id == shard)
            .values(
                event_count=count,
                last_event_id=last_id,
                last_hash=prev,
                keyed_from=head.keyed_from,
                mac=mac,
            )
        )


def relink(conn: Connection, *, first: int, last: int) -> None:
    """Recompute the unkeyed links of shard 0's events #first..#last (1-based), keeping the
    rest."""
    table = AuditEvent.__table__
    rows = list(
        conn.execute(select(table).where(table.c.shard == 0).order_by(table.c.id)).mappings()
    )
    prev = rows[first - 2]["hash"] if first > 1 else ""
    for row in rows[first - 1 : last]:
        link = digest(prev, AuditEvent(**dict(row)))
        conn.execute(
            update(AuditEvent).where(AuditEvent.id == row["id"]).values(prev_hash=prev, hash=link)
        )
        prev = link


def event_id(conn: Connection, position: int) -> int:
    """The id of the log's ``position``-th event (1-based, in id order): ids are taken a few at
    a time with a chain's lock, so they leave gaps."""
    table = AuditEvent.__table__
    ids = conn.execute(select(table.c.id).order_by(table.c.id)).scalars().all()
    return int(ids[position - 1])
