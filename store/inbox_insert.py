"""Storing items in the decision inbox: on the path of every click's ack, so one statement
compiled once, whatever the batch (and on PostgreSQL the NOTIFY that wakes workers with it)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, insert, text
from sqlalchemy.orm import Session

from store.clean import clean_json, json_text
from store.inbox_models import InboxItem, InboxKind, InboxStatus

INBOX_CHANNEL = "approval_inbox"
"""The PostgreSQL NOTIFY channel workers LISTEN on."""


_STORED = """
WITH item AS (
    SELECT item ->> 'kind' AS kind, item -> 'payload' AS payload, n
    FROM json_array_elements(CAST(:items AS json)) WITH ORDINALITY AS given (item, n)
), stored AS (
    INSERT INTO inbox_items (kind, payload, status, claimed_by, lease_until, attempts, created_at)
    SELECT kind, payload,
        CASE WHEN n <= :held THEN :claimed ELSE :queued END,
        CASE WHEN n <= :held THEN CAST(:owner AS varchar) END,
        CASE WHEN n <= :held THEN CAST(:until AS timestamptz) END,
        CASE WHEN n <= :held THEN 1 ELSE 0 END,
        :now
    FROM item ORDER BY n
    RETURNING id
)"""
_ADD = text(_STORED + " SELECT id FROM stored ORDER BY id").columns(id=Integer)
"""Items stored, all of them claimed: no worker elsewhere is woken."""
_ADD_AND_NOTIFY = text(
    _STORED
    + """, rung AS (
    SELECT pg_notify(:channel, concat(CAST(:origin AS text), ' ', max(id))) FROM stored
)
SELECT id FROM stored JOIN rung ON true ORDER BY id"""
).columns(id=Integer)
"""Items stored, some queued: the NOTIFY names the origin and the last id."""


def notified_by(payload: str) -> str:
    """The ``origin`` that stored the items a NOTIFY announces ("" if none was given)."""
    return payload.partition(" ")[0]


@dataclass(frozen=True)
class Held:
    """Items stored already claimed by ``owner`` until ``until`` (their first attempt): handed
    to that owner's idle workers in memory, and claimed again by anyone once lapsed, like an
    item claimed the usual way."""

    owner: str
    until: dt.datetime
    count: int


def insert_items(
    session: Session,
    items: list[tuple[InboxKind, dict[str, Any]]],
    *,
    origin: str,
    held: Held | None,
    now: dt.datetime,
) -> list[int]:
    """See ``InboxRepository.add_many``."""
    count = min(held.count, len(items)) if held is not None else 0
    if session.get_bind().dialect.name == "postgresql":
        return _add_and_notify(session, items, origin=origin, held=held, count=count, now=now)
    rows = [
        {
            "kind": kind,
            "payload": clean_json(payload),
            "status": InboxStatus.CLAIMED if n < count else InboxStatus.QUEUED,
            "claimed_by": held.owner if held is not None and n < count else None,
            "lease_until": held.until if held is not None and n < count else None,
            "attempts": 1 if n < count else 0,
            "created_at": now,
        }
        for n, (kind, payload) in enumerate(items)
    ]
    # Every row names every column (render_nulls): one statement for any mix of rows.
    stmt = (
        insert(InboxItem)
        .returning(InboxItem.id, sort_by_parameter_order=True)
        .execution_options(render_nulls=True)
    )
    return list(session.scalars(stmt, rows))


def _add_and_notify(
    session: Session,
    items: list[tuple[InboxKind, dict[str, Any]]],
    *,
    origin: str,
    held: Held | None,
    count: int,
    now: dt.datetime,
) -> list[int]:
    """One round trip: the insert, and (if any item is queued) a NOTIFY naming the last.
    The items go as one JSON array, so the statement's text is the same for any batch.
    Ids follow the order the rows are inserted in (each draws from the sequence in turn),
    which is the order given: sorting them gives that order."""
    params = {
        "items": json_text([{"kind": kind, "payload": payload} for kind, payload in items]),
        "held": count,
        "owner": held.owner if held is not None else None,
        "until": held.until if held is not None else None,
        "claimed": InboxStatus.CLAIMED.value,
        "queued": InboxStatus.QUEUED.value,
        "now": now,
    }
    if count < len(items):
        params.update(channel=INBOX_CHANNEL, origin=origin)
        return list(session.scalars(_ADD_AND_NOTIFY, params))
    return list(session.scalars(_ADD, params))
