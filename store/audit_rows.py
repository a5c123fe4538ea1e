"""The audit log's statements on an append's path: lock a chain's head and take ids for its
events, and write the events with the head.

Ids are taken while the chain's head is locked, so a chain's order is its ids' order (every id
a chain's writer takes is above those its previous writer took: the ids' sequence hands out
numbers in order, as a SERIAL's does with its default CACHE 1), and the head's MAC, which covers
the newest id, is known before anything is written. On PostgreSQL the events and the head then
go out in one statement; SQLite, whose writers take turns for the whole database, numbers them
after the highest id and writes them in two. Ids taken and not used leave gaps.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Table,
    TextClause,
    bindparam,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.sql import func

from store.audit_models import AuditEvent, AuditHead

ID_BLOCK = 3
"""Ids taken with a chain's lock: as many as a click's transactions append (a decision that
completes its request two, its outcome three); one that appends more takes more, under it."""

HEAD_FIELDS = ("id", "event_count", "last_event_id", "last_hash", "keyed_from", "mac")
_EVENTS = cast(Table, AuditEvent.__table__)
_HEADS = cast(Table, AuditHead.__table__)
EVENT_FIELDS = tuple(c.name for c in _EVENTS.columns)
_LIST = ", ".join(HEAD_FIELDS)

# The ids' subquery refers to the locked row, so it runs once the lock is held: in a plain
# ``SELECT ... FOR UPDATE`` PostgreSQL would take them before waiting for the lock.
_NEXT_ID = "nextval(pg_get_serial_sequence('audit_events', 'id')::regclass)"
_PG_LOCK = text(
    f"WITH head AS MATERIALIZED (SELECT {_LIST} FROM audit_head WHERE id = :shard FOR UPDATE) "
    f"SELECT {_LIST}, ARRAY(SELECT {_NEXT_ID} "
    "FROM generate_series(1, :block + 0 * head.event_count)) AS ids FROM head"
)
_PG_MORE = text(f"SELECT {_NEXT_ID} FROM generate_series(1, :block)")
_PG_CACHE = text(
    "SELECT cache_size, pg_get_serial_sequence('audit_events', 'id') AS name FROM pg_sequences "
    "WHERE format('%I.%I', schemaname, sequencename)::regclass "
    "= pg_get_serial_sequence('audit_events', 'id')::regclass"
)
_SQLITE_LOCK = select(
    *(_HEADS.c[name] for name in HEAD_FIELDS),
    select(func.coalesce(func.max(_EVENTS.c.id), 0)).scalar_subquery().label("top"),
).where(_HEADS.c.id == bindparam("shard"))
_HEAD_VALUES = ("event_count", "last_event_id", "last_hash", "mac")
_WRITE_HEAD = (
    update(_HEADS)
    .where(_HEADS.c.id == bindparam("shard"))
    .values({name: bindparam(name) for name in _HEAD_VALUES})
)


def lock_head(conn: Connection, shard: int) -> tuple[AuditHead, list[int]] | None:
    """The chain's head, row-locked (PostgreSQL; SQLite's write lock is already held), with
    the first ids for the events this transaction appends to it; ``None`` if its row is gone."""
    if conn.dialect.name == "postgresql":
        row = conn.execute(_PG_LOCK, {"shard": shard, "block": ID_BLOCK}).first()
        if row is None:
            return None
        ids = list(row.ids)
    else:
        row = conn.execute(_SQLITE_LOCK, {"shard": shard}).first()
        if row is None:
            return None
        ids = list(range(row.top + 1, row.top + 1 + ID_BLOCK))
    head = AuditHead(**{name: getattr(row, name) for name in HEAD_FIELDS})
    return head, ids


def ids_problem(conn: Connection) -> str | None:
    """Why the ids' sequence cannot keep a chain's order, if it cannot: with CACHE above 1
    each connection hands out ids from a range of its own."""
    if conn.dialect.name != "postgresql":
        return None
    row = conn.execute(_PG_CACHE).first()
    if row is None or row.cache_size <= 1:
        return None
    return (
        f"the audit ids' sequence caches {row.cache_size} ids per connection, so a chain's ids "
        f"would not follow its order: run `ALTER SEQUENCE {row.name} CACHE 1` (its default)"
    )


def more_ids(conn: Connection, *, after: int) -> list[int]:
    """More ids for a chain whose head this transaction holds."""
    if conn.dialect.name == "postgresql":
        return list(conn.execute(_PG_MORE, {"block": ID_BLOCK}).scalars())
    return list(range(after + 1, after + 1 + ID_BLOCK))


_INSERT_EVENTS = insert(_EVENTS)
"""Events without the head (several go as one cached executemany)."""


@functools.lru_cache(maxsize=16)
def _appended(rows: int) -> TextClause:
    """The INSERT of ``rows`` events and the head's write, in one statement (as text: a Core
    INSERT of several rows of VALUES has no cache key, and would be compiled at every
    execution)."""
    names = ", ".join(EVENT_FIELDS)
    values = ", ".join(
        "(" + ", ".join(f":{name}_{n}" for name in EVENT_FIELDS) + ")" for n in range(rows)
    )
    sets = ", ".join(f"{name} = :{name}" for name in _HEAD_VALUES)
    statement = text(
        f"WITH appended AS (INSERT INTO audit_events ({names}) VALUES {values}) "
        f"UPDATE audit_head SET {sets} WHERE id = :shard"
    )
    return statement.bindparams(
        *(bindparam(f"{c.name}_{n}", type_=c.type) for n in range(rows) for c in _EVENTS.columns)
    )


def _params(events: Sequence[AuditEvent]) -> dict[str, Any]:
    return {f"{name}_{n}": getattr(e, name) for n, e in enumerate(events) for name in EVENT_FIELDS}


def write(conn: Connection, events: Sequence[AuditEvent], *, head: dict[str, Any] | None) -> None:
    """Insert ``events``, and write the chain's ``head`` values (with its ``shard``) if given:
    on PostgreSQL in one statement."""
    if not events:
        if head is not None:
            conn.execute(_WRITE_HEAD, head)
        return
    if head is not None and conn.dialect.name == "postgresql":
        conn.execute(_appended(len(events)), {**_params(events), **head})
        return
    rows = [{name: getattr(e, name) for name in EVENT_FIELDS} for e in events]
    conn.execute(_INSERT_EVENTS, rows)
    if head is not None:
        conn.execute(_WRITE_HEAD, head)
