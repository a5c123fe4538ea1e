"""The decision inbox's repository: add an item (and wake workers), claim, finish.

A claim is a lease: an item whose lease ran out (its worker died) is claimed again. On
PostgreSQL workers skip rows another worker has locked (``FOR UPDATE SKIP LOCKED``); SQLite
serializes writers (``BEGIN IMMEDIATE``), so a conditional update is enough there.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import and_, func, or_, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from store.models import InboxItem, InboxKind, InboxStatus, utcnow
from store.repositories import affected

INBOX_CHANNEL = "approval_inbox"
"""The PostgreSQL NOTIFY channel workers LISTEN on."""


def _claimable(now: dt.datetime) -> ColumnElement[bool]:
    return or_(
        InboxItem.status == InboxStatus.QUEUED,
        and_(InboxItem.status == InboxStatus.CLAIMED, InboxItem.lease_until <= now),
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

    def add_many(self, items: list[tuple[InboxKind, dict[str, Any]]]) -> list[int]:
        """Queue several items in this transaction (one insert, one NOTIFY); their ids."""
        now = utcnow()
        rows = [
            InboxItem(
                kind=kind, payload=payload, status=InboxStatus.QUEUED, attempts=0, created_at=now
            )
            for kind, payload in items
        ]
        self.session.add_all(rows)
        self.session.flush()
        if self._postgres and rows:
            self.session.execute(
                text("SELECT pg_notify(:channel, :id)"),
                {"channel": INBOX_CHANNEL, "id": str(rows[-1].id)},
            )
        return [row.id for row in rows]

    def get(self, item_id: int) -> InboxItem | None:
        return self.session.get(InboxItem, item_id)

    def claim_next(
        self, *, owner: str, lease: dt.timedelta, now: dt.datetime | None = None
    ) -> InboxItem | None:
        """The oldest queued item, or one whose lease ran out; None if there is none."""
        now = now or utcnow()
        if self._postgres:
            stmt = (
                select(InboxItem)
                .where(_claimable(now))
                .order_by(InboxItem.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            item = self.session.scalars(stmt).one_or_none()
            if item is None:
                return None
        else:
            found = self.session.scalar(
                select(InboxItem.id).where(_claimable(now)).order_by(InboxItem.id).limit(1)
            )
            if found is None:
                return None
            won = self.session.execute(
                update(InboxItem)
                .where(InboxItem.id == found, _claimable(now))
                .values(status=InboxStatus.CLAIMED)
                .execution_options(synchronize_session=False)
            )
            if not affected(won):
                return None
            item = self.session.get(InboxItem, found, populate_existing=True)
            assert item is not None
        item.status = InboxStatus.CLAIMED
        item.claimed_by = owner
        item.lease_until = now + lease
        item.attempts += 1
        self.session.flush()
        return item

    def renew(self, item_id: int, *, owner: str, until: dt.datetime) -> bool:
        """Extend a lease this owner still holds; False if it lost it."""
        result = self.session.execute(
            update(InboxItem)
            .where(
                InboxItem.id == item_id,
                InboxItem.status == InboxStatus.CLAIMED,
                InboxItem.claimed_by == owner,
            )
            .values(lease_until=until)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def finish(
        self, item_id: int, *, owner: str, status: InboxStatus, error: str | None = None
    ) -> bool:
        """Mark done or failed; False if another worker has claimed it since (lease lost)."""
        result = self.session.execute(
            update(InboxItem)
            .where(
                InboxItem.id == item_id,
                InboxItem.status == InboxStatus.CLAIMED,
                InboxItem.claimed_by == owner,
            )
            .values(status=status, finished_at=utcnow(), lease_until=None, last_error=error)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def unfinished(self) -> int:
        """Items queued or claimed (used to wait for an idle inbox)."""
        stmt = select(func.count()).where(
            InboxItem.status.in_((InboxStatus.QUEUED, InboxStatus.CLAIMED))
        )
        return int(self.session.scalar(stmt) or 0)
