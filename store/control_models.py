"""Store-wide state: facts about the store itself (such as the checkpoint key's check) and the
operators' execution switch."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from store.clean import CleanText
from store.models import Base


class StoreMeta(Base):
    __tablename__ = "store_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ExecutionSwitch(Base):
    """The operators' kill switch: one row. While it is off, no gated tool runs and no card
    can be approved, whatever the approvals say."""

    __tablename__ = "execution_switch"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    paused: Mapped[bool] = mapped_column(default=False)
    reason: Mapped[str | None] = mapped_column(CleanText)
    changed_by: Mapped[str | None] = mapped_column(String(64))
    changed_at: Mapped[dt.datetime | None] = mapped_column()
