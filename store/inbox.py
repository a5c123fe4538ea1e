"""The decision inbox's repository: add an item (and wake workers), claim, finish.

A claim is a lease: an item whose lease ran out (its worker died) is claimed again. On
PostgreSQL workers skip rows another worker has locked (``FOR UPDATE SKIP LOCKED``); SQLite
serializes writers (``BEGIN IMMEDIATE``), so a conditional update is enough there.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from store.models import InboxItem, InboxKind, InboxStatus, utcnow
from store.repositories import affected

INBOX_CHANNEL = "approval_inbox"
"""The PostgreSQL NOTIFY channel workers LISTEN on."""


def notified_by(payload: str) -> str:
    """The ``origin`` that stored the items a NOTIFY announces ("" if none was given)."""
    return payload.partition(" ")[0]


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
        self, items: list[tuple[InboxKind, dict[str, Any]]], *, origin: str = ""
    ) -> list[int]:
        """Queue several items in this transaction (one insert, one NOTIFY); their ids.
        ``origin`` (no spaces) rides on the NOTIFY: the process that stored the items has
        woken its own worker already, and its listener need not wake a second one."""
        if not items:
            return []
        now = utcnow()
        rows = [
            {
                "kind": kind,
                "payload": payload,
                "status": InboxStatus.QUEUED,
                "attempts": 0,
                "created_at": now,
            }
            for kind, payload in items
        ]
        # One statement, no unit of work: this is on the path of every click's ack.
        stmt = insert(InboxItem).returning(InboxItem.id, sort_by_parameter_order=True)
        ids = list(self.session.scalars(stmt, rows))
        if self._postgres:
            self.session.execute(
                text("SELECT pg_notify(:channel, :id)"),
                {"channel": INBOX_CHANNEL, "id": f"{origin} {ids[-1]}"},
            )
        return ids

    def get(self, item_id: int) -> InboxItem | None:
        return self.session.get(InboxItem, item_id)

    def claim_next(
        self, *, owner: str, lease: dt.timedelta, now: dt.datetime | None = None
    ) -> InboxItem | None:
        """The oldest queued item, else the oldest whose lease ran out; None if there is none.
        Each look is one status at a time, so it is read from the (status, id) index, not by
        scanning every item ever stored."""
        now = now or utcnow()
        for wanted in (_queued(), _lapsed(now)):
            item = self._take(wanted)
            if item is not None:
                item.status = InboxStatus.CLAIMED
                item.claimed_by = owner
                item.lease_until = now + lease
                item.attempts += 1
                self.session.flush()
                return item
        return None

    def _take(self, wanted: ColumnElement[bool]) -> InboxItem | None:
        if self._postgres:
            stmt = (
                select(InboxItem)
                .where(wanted)
                .order_by(InboxItem.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            return self.session.scalars(stmt).one_or_none()
        found = self.session.scalar(
            select(InboxItem.id).where(wanted).order_by(InboxItem.id).limit(1)
        )
        if found is None:
            return None
        won = self.session.execute(
            update(InboxItem)
            .where(InboxItem.id == found, wanted)
            .values(status=InboxStatus.CLAIMED)
            .execution_options(synchronize_session=False)
        )
        if not affected(won):
            return None
        return self.session.get(InboxItem, found, populate_existing=True)

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
