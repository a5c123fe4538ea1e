"""The decision inbox's repository: add an item (and wake workers), claim, finish.

A claim is a lease: an item whose lease ran out (its worker died) is claimed again. On
PostgreSQL workers skip rows another worker has locked (``FOR UPDATE SKIP LOCKED``); SQLite
serializes writers, so the same single update is enough there.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import and_, delete, func, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import ScalarSelect

from store.db import affected
from store.inbox_insert import (
    INBOX_CHANNEL,
    Held,
    insert_items,
    notified_by,
)
from store.inbox_models import InboxItem, InboxKind, InboxStatus
from store.models import utcnow

__all__ = ["INBOX_CHANNEL", "Held", "InboxRepository", "notified_by"]


def _queued() -> ColumnElement[bool]:
    return InboxItem.status == InboxStatus.QUEUED


def _held(item_id: int, owner: str) -> ColumnElement[bool]:
    """The item is still claimed by this owner: only it may renew, hand back or finish it."""
    return and_(
        InboxItem.id == item_id,
        InboxItem.status == InboxStatus.CLAIMED,
        InboxItem.claimed_by == owner,
    )


def _lapsed(now: dt.datetime) -> ColumnElement[bool]:
    """Claimed by a worker that died (or handed back to be tried again later)."""
    return and_(InboxItem.status == InboxStatus.CLAIMED, InboxItem.lease_until <= now)


def _oldest(wanted: ColumnElement[bool]) -> ScalarSelect[int]:
    """The id of the oldest such item, locked (rows locked by another claim are skipped)."""
    return (
        select(InboxItem.id)
        .where(wanted)
        .order_by(InboxItem.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )


class InboxRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def _postgres(self) -> bool:
        return self.session.get_bind().dialect.name == "postgresql"

    def add(self, kind: InboxKind, payload: dict[str, Any]) -> InboxItem:
        """Queue an item; on PostgreSQL the NOTIFY is delivered when this transaction commits."""
        (item_id,) = self.add_many([(kind, payload)])
        item = self.session.get(InboxItem, item_id)
        assert item is not None
        return item

    def add_many(
        self,
        items: list[tuple[InboxKind, dict[str, Any]]],
        *,
        origin: str = "",
        held: Held | None = None,
        now: dt.datetime | None = None,
    ) -> list[int]:
        """Queue several items in this transaction (one statement, NOTIFY included); their ids,
        in the order given. ``origin`` (no spaces) rides on the NOTIFY: the process that stored
        the items has woken its own worker already, and its listener need not wake a second
        one. The first ``held.count`` items are stored claimed (see ``Held``)."""
        if not items:
            return []
        return insert_items(self.session, items, origin=origin, held=held, now=now or utcnow())

    def get(self, item_id: int) -> InboxItem | None:
        return self.session.get(InboxItem, item_id)

    def claim_next(
        self, *, owner: str, lease: dt.timedelta, now: dt.datetime | None = None
    ) -> InboxItem | None:
        """The oldest queued item, else the oldest whose lease ran out; None if there is none.
        One statement: the second look runs only if the first found nothing, and each look
        is one status at a time, read from the (status, id) index. On PostgreSQL a row another
        worker is claiming is skipped; SQLite runs one writer at a time."""
        now = now or utcnow()
        wanted = func.coalesce(_oldest(_queued()), _oldest(_lapsed(now)))
        stmt = (
            update(InboxItem)
            .where(InboxItem.id == wanted)
            .values(
                status=InboxStatus.CLAIMED,
                claimed_by=owner,
                lease_until=now + lease,
                attempts=InboxItem.attempts + 1,
            )
            .returning(InboxItem)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return self.session.scalars(stmt).one_or_none()

    def release(self, item_ids: list[int], *, owner: str) -> int:
        """Queue again items stored claimed for a worker that never got them (its pool was
        stopping), as if never claimed; how many this owner still held."""
        result = self.session.execute(
            update(InboxItem)
            .where(
                InboxItem.id.in_(item_ids),
                InboxItem.status == InboxStatus.CLAIMED,
                InboxItem.claimed_by == owner,
            )
            .values(
                status=InboxStatus.QUEUED,
                claimed_by=None,
                lease_until=None,
                attempts=InboxItem.attempts - 1,
            )
            .execution_options(synchronize_session=False)
        )
        released = affected(result)
        if released and self._postgres:  # other processes' workers may take them
            self.session.execute(
                text("SELECT pg_notify(:channel, :id)"),
                {"channel": INBOX_CHANNEL, "id": f" {max(item_ids)}"},
            )
        return released

    def keep_handed(
        self, item_id: int, *, owner: str, lease: dt.timedelta, now: dt.datetime | None = None
    ) -> bool:
        """An item stored claimed for this owner and handed over in memory, taken late: extend
        its lease if it is still that first claim and its lease has not run out (nobody, not
        even another worker of this owner, has claimed it again); False: leave it alone."""
        now = now or utcnow()
        result = self.session.execute(
            update(InboxItem)
            .where(_held(item_id, owner), InboxItem.attempts == 1, InboxItem.lease_until > now)
            .values(lease_until=now + lease)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def renew(self, item_id: int, *, owner: str, until: dt.datetime) -> bool:
        """Extend a lease this owner still holds; False if it lost it."""
        result = self.session.execute(
            update(InboxItem)
            .where(
                _held(item_id, owner),
            )
            .values(lease_until=until)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def retry_later(self, item_id: int, *, owner: str, at: dt.datetime, error: str) -> bool:
        """Give the item back, to be claimed again from ``at`` (by any worker); False if
        this owner no longer holds it."""
        result = self.session.execute(
            update(InboxItem)
            .where(
                _held(item_id, owner),
            )
            .values(claimed_by=None, lease_until=at, last_error=error)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def prune(self, *, finished_before: dt.datetime) -> int:
        """Delete items done or failed before then: the decisions and the audit log keep
        what they led to."""
        result = self.session.execute(
            delete(InboxItem)
            .where(
                InboxItem.status.in_((InboxStatus.DONE, InboxStatus.FAILED)),
                InboxItem.finished_at < finished_before,
            )
            .execution_options(synchronize_session=False)
        )
        return affected(result)

    def finish(
        self, item_id: int, *, owner: str, status: InboxStatus, error: str | None = None
    ) -> bool:
        """Mark done or failed; False if another worker has claimed it since (lease lost)."""
        result = self.session.execute(
            update(InboxItem)
            .where(
                _held(item_id, owner),
            )
            .values(status=status, finished_at=utcnow(), lease_until=None, last_error=error)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def depth(self, now: dt.datetime | None = None) -> dict[str, float]:
        """For monitoring: items waiting, being worked on and failed, and the age in seconds
        of the oldest waiting one (0 if none)."""
        counts = dict(
            self.session.execute(
                select(InboxItem.status, func.count()).group_by(InboxItem.status)
            ).all()
        )
        oldest = self.session.scalar(
            select(func.min(InboxItem.created_at)).where(InboxItem.status == InboxStatus.QUEUED)
        )
        age = ((now or utcnow()) - oldest).total_seconds() if oldest is not None else 0.0
        return {
            "inbox_queued": float(counts.get(InboxStatus.QUEUED, 0)),
            "inbox_claimed": float(counts.get(InboxStatus.CLAIMED, 0)),
            "inbox_failed": float(counts.get(InboxStatus.FAILED, 0)),
            "inbox_oldest_queued_seconds": max(age, 0.0),
        }

    def unfinished(self) -> int:
        """Items queued or claimed (used to wait for an idle inbox)."""
        stmt = select(func.count()).where(
            InboxItem.status.in_((InboxStatus.QUEUED, InboxStatus.CLAIMED))
        )
        return int(self.session.scalar(stmt) or 0)
