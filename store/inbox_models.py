"""The decision inbox's model: clicks and submissions stored before the ack, and their kinds
and statuses."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

from sqlalchemy import JSON, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from store.clean import CleanText
from store.models import Base, utcnow


class InboxKind(enum.StrEnum):
    """What an acked click or submission asks for; the worker dispatches on it."""

    APPROVE = "approve"
    APPROVE_ALL = "approve_all"
    DECIDE = "decide"
    """A modal submission: reject with a reason, respond, or edit."""
    CANCEL = "cancel"
    """A Cancel click on one of a run's messages."""


class InboxStatus(enum.StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"


class InboxItem(Base):
    """A click or submission Slack was told we have: stored before the ack, so a crash or a
    busy process after it loses nothing. A worker claims it with a lease; a dead worker's
    lease runs out and another claims it again."""

    __tablename__ = "inbox_items"
    __table_args__ = (Index("ix_inbox_items_status_id", "status", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default=InboxStatus.QUEUED)
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column()
    last_error: Mapped[str | None] = mapped_column(CleanText)
