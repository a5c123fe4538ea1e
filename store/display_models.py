"""What the store keeps of what the bot shows in Slack besides an approval's own card: digest
messages with the approvals they list, and who has the Home tab open."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from store.models import Base, utcnow


class DigestMessage(Base):
    """One digest message: several pending approvals of a channel, each with its buttons.

    Created with its items before it is posted; ``ts`` is stored after the post. Whoever holds
    ``posting_until`` (a lease) posts it, or after a lost answer looks for it and posts again."""

    __tablename__ = "digest_messages"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    channel: Mapped[str] = mapped_column(String(32))
    team_id: Mapped[str | None] = mapped_column(String(32))
    ts: Mapped[str | None] = mapped_column(String(32))
    posting_until: Mapped[dt.datetime | None] = mapped_column()
    drawn: Mapped[str | None] = mapped_column(String(64))
    """A fingerprint of what the message last showed: a redraw lost to a crash is repaired."""
    settled: Mapped[bool] = mapped_column(default=False)
    """Every request it lists is closed and drawn so: maintenance stops looking at it."""
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    items: Mapped[list[DigestItem]] = relationship(order_by="DigestItem.position")


class DigestItem(Base):
    """A request listed in a digest; a request is listed in one digest only (its key)."""

    __tablename__ = "digest_items"

    request_id: Mapped[str] = mapped_column(ForeignKey("approval_requests.id"), primary_key=True)
    digest_id: Mapped[str] = mapped_column(ForeignKey("digest_messages.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)


class HomeViewer(Base):
    """Someone who opened the bot's Home tab: only their Home is republished when an approval
    or a run they are part of changes (the others see it fresh when they open it)."""

    __tablename__ = "home_viewers"

    user_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    team_id: Mapped[str | None] = mapped_column(String(32))
    enterprise_id: Mapped[str | None] = mapped_column(String(32))
    opened_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
