"""The kill switch's row: read (under a shared lock at the point of effect) and flipped."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from store.control_models import ExecutionSwitch
from store.db import affected

SWITCH_ID = 1


@dataclass(frozen=True)
class SwitchState:
    paused: bool
    reason: str | None = None
    changed_by: str | None = None
    changed_at: dt.datetime | None = None


class SwitchRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def state(self, *, hold: bool = False) -> SwitchState:
        """``hold``: a shared lock until the transaction ends, so a pause commits either
        before this reader (which then sees it) or after it (PostgreSQL; SQLite writes one at a
        time)."""
        stmt = select(
            ExecutionSwitch.paused,
            ExecutionSwitch.reason,
            ExecutionSwitch.changed_by,
            ExecutionSwitch.changed_at,
        ).where(ExecutionSwitch.id == SWITCH_ID)
        # A Core read on the transaction's connection: it is on every decision's path and at
        # every point of effect, and through the ORM it costs about twice the CPU.
        row = (
            self.session.connection()
            .execute(stmt.with_for_update(read=True) if hold else stmt)
            .first()
        )
        if row is None:  # a database migrated without the row: treat as running
            return SwitchState(paused=False)
        return SwitchState(row.paused, row.reason, row.changed_by, row.changed_at)

    def set(self, *, paused: bool, by: str, reason: str | None, at: dt.datetime) -> bool:
        """Flip the switch; ``False`` if it already was in that position (nothing changed)."""
        result = self.session.execute(
            update(ExecutionSwitch)
            .where(ExecutionSwitch.id == SWITCH_ID, ExecutionSwitch.paused == (not paused))
            .values(paused=paused, reason=reason, changed_by=by, changed_at=at)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0
