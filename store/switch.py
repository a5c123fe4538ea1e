"""The kill switch's row: read under a shared lock where it matters (at the point of effect, and
by a decision that would approve, from the statement that locks its request), and flipped."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, Row, String, Text, select, text, update
from sqlalchemy.orm import Session

from store.control_models import ExecutionSwitch
from store.db import affected, innermost
from store.models import UTCDateTime

SWITCH_ID = 1
_HELD_INFO = "switch_held"  # ``Session.info``: (transaction, state) of a switch read and held

# The switch's subquery refers to the locked row, so PostgreSQL runs it once the request's lock
# is held: lock order, the request's row, then the switch. A pause does not wait for a decision
# still waiting for its request; it waits for one that holds the switch, until it commits.
_LOCK_REQUEST_AND_SWITCH = text(
    "WITH request AS MATERIALIZED (SELECT approval_requests.id FROM approval_requests "
    "JOIN actions ON actions.request_id = approval_requests.id WHERE actions.id = :action_id "
    "FOR UPDATE OF approval_requests) "
    "SELECT request.id, switch.paused, switch.reason, switch.changed_by, switch.changed_at "
    "FROM request LEFT JOIN LATERAL (SELECT paused, reason, changed_by, changed_at "
    "FROM execution_switch WHERE id = :switch AND request.id IS NOT NULL FOR SHARE) AS switch "
    "ON true"
).columns(
    id=String(),
    paused=Boolean(),
    reason=Text(),
    changed_by=String(),
    changed_at=UTCDateTime(),  # as the model reads it
)


_STATE = select(
    ExecutionSwitch.paused,
    ExecutionSwitch.reason,
    ExecutionSwitch.changed_by,
    ExecutionSwitch.changed_at,
).where(ExecutionSwitch.id == SWITCH_ID)
_STATE_HELD = _STATE.with_for_update(read=True)
"""Built once: read on every decision's path and at every point of effect."""


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
        time). Not read again if this transaction holds it already (``lock_request_of``)."""
        if hold:
            self.session.connection()  # the transaction has begun
            held = self.session.info.get(_HELD_INFO)
            if held is not None and held[0] is innermost(self.session):
                return held[1]
        # A Core read on the transaction's connection: through the ORM it costs about twice
        # the CPU.
        row = self.session.connection().execute(_STATE_HELD if hold else _STATE).first()
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


def lock_request_of(session: Session, action_id: str) -> str | None:
    """PostgreSQL: lock the row of the action's request and then, in the same statement, hold
    the switch (as ``state(hold=True)`` does, which then reads nothing); the request's id, or
    ``None`` if there is no such action."""
    conn = session.connection()
    row = conn.execute(_LOCK_REQUEST_AND_SWITCH, {"action_id": action_id, "switch": SWITCH_ID})
    found = row.first()
    if found is None:
        return None
    session.info[_HELD_INFO] = (innermost(session), _state_of(found))
    return str(found.id)


def remember_held(session: Session, state: SwitchState) -> None:
    """The switch as a statement of this transaction read and held it: ``state(hold=True)``
    then reads nothing."""
    session.info[_HELD_INFO] = (innermost(session), state)


def _state_of(found: Row[Any]) -> SwitchState:
    if found.paused is None:  # a database migrated without the row: treat as running
        return SwitchState(paused=False)
    return SwitchState(found.paused, found.reason, found.changed_by, found.changed_at)
