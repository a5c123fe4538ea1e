"""Repositories: take a session, never commit. The caller owns the transaction."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence

from sqlalchemy import Update, bindparam, select, update
from sqlalchemy.orm import Session, joinedload, selectinload
from sqlalchemy.orm.attributes import set_committed_value

from store import pending_slots
from store.audit_log import AuditRepository
from store.card_repository import CardRepository
from store.clean import clean_text
from store.db import affected
from store.decision_repository import DecisionRepository
from store.models import Action, ApprovalRequest, utcnow
from store.pending_reads import RunRecord
from store.request_end import CLOSE, CLOSE_WITH_ITS_RUN, RUN_COLUMNS, CardPlace, Closed
from store.run_repository import RunRepository
from store.statuses import OPEN_REQUEST, RequestStatus
from store.switch import lock_request_of

# Each repository lives in a module of its own (the audit log's beside its chain); callers
# find these here. A request's claim and its lease have theirs: store.claim_repository.
__all__ = [
    "ApprovalRepository",
    "AuditRepository",
    "CardRepository",
    "DecisionRepository",
    "RunRepository",
    "affected",
]


@functools.cache
def _action_update(names: tuple[str, ...]) -> Update:
    """An UPDATE of these fields of one action, built once per set of fields (the values go as
    parameters)."""
    return (
        update(Action)
        .where(Action.id == bindparam("decided_action"))
        .values({name: bindparam(name) for name in names})
    )


def _ended(status: str, outcome: str) -> dict[str, object]:
    """What a request's end writes, whether through the ORM or one statement."""
    return {
        "status": status,
        "outcome": clean_text(outcome),  # it may quote an agent's failure: anything
        "resolved_at": utcnow(),
        "claimed_by": None,
        "claim_expires_at": None,
    }


_LOAD = (
    select(ApprovalRequest)
    .where(ApprovalRequest.id == bindparam("loaded"))
    .options(
        joinedload(ApprovalRequest.run),
        joinedload(ApprovalRequest.actions).joinedload(Action.decisions),
    )
)
_LOAD_FRESH = _LOAD.execution_options(populate_existing=True)
"""Built once, with its loader options (their cache key is the costly part): every decision
loads its request so."""
_FOUND = (
    select(ApprovalRequest.id)
    .join(Action, Action.request_id == ApprovalRequest.id)
    .where(Action.id == bindparam("of_action"))
)
_FOUND_LOCKED = _FOUND.with_for_update(of=ApprovalRequest)
_OPEN_OF_RUN = (
    select(ApprovalRequest.id)
    .where(
        ApprovalRequest.run_id == bindparam("open_run"),
        ApprovalRequest.status.in_(bindparam("open_statuses", expanding=True)),
    )
    .order_by(ApprovalRequest.id)
    .with_for_update(key_share=True)
)


class ApprovalRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, request: ApprovalRequest, actions: list[Action]) -> ApprovalRequest:
        self.session.add(request)
        for action in actions:
            action.request_id = request.id
            self.session.add(action)
        self.session.flush()
        return request

    def get(self, request_id: str, *, for_update: bool = False) -> ApprovalRequest | None:
        """Load a request with its run, actions and decisions in one round trip.

        ``for_update`` first locks the request's row, alone (locking the run too would go
        against the lock order), then loads the rest in a statement of its own: on PostgreSQL
        a statement that waited for a row lock re-reads only the locked row, and rows it
        joined would be as they were before the wait (a decision committed meanwhile
        missing)."""
        if for_update:
            locked = (
                select(ApprovalRequest.id).where(ApprovalRequest.id == request_id).with_for_update()
            )
            if self.session.connection().execute(locked).scalar() is None:
                return None
        return self._load(request_id, fresh=for_update)

    def _load(self, request_id: str, *, fresh: bool) -> ApprovalRequest | None:
        # What was read before the lock is stale once we hold it: overwrite it all (fresh).
        stmt = _LOAD_FRESH if fresh else _LOAD
        return self.session.scalars(stmt, {"loaded": request_id}).unique().one_or_none()

    def get_by_action(
        self, action_id: str, *, for_update: bool = False, hold_switch: bool = False
    ) -> ApprovalRequest | None:
        """The request of an action, loaded as ``get`` loads it; ``for_update`` locks the
        request's row through the action's id in the same statement that finds it, and
        ``hold_switch`` then (on PostgreSQL) the kill switch's too (``switch.lock_request_of``)."""
        if for_update and hold_switch and self.session.connection().dialect.name == "postgresql":
            held = lock_request_of(self.session, action_id)
            return None if held is None else self._load(held, fresh=True)
        found = _FOUND_LOCKED if for_update else _FOUND
        request_id = self.session.connection().execute(found, {"of_action": action_id}).scalar()
        if request_id is None:
            return None
        return self._load(request_id, fresh=for_update)

    def run_id_of(self, request_id: str) -> str | None:
        return self.session.scalar(
            select(ApprovalRequest.run_id).where(ApprovalRequest.id == request_id)
        )

    def get_action(self, action_id: str) -> Action | None:
        return self.session.get(Action, action_id)

    def by_interrupt(self, run_id: str, interrupt_id: str) -> ApprovalRequest | None:
        stmt = select(ApprovalRequest).where(
            ApprovalRequest.run_id == run_id, ApprovalRequest.interrupt_id == interrupt_id
        )
        return self.session.scalars(stmt).first()

    def lock_open_of_run(
        self, run_id: str, *, statuses: tuple[RequestStatus, ...] = OPEN_REQUEST
    ) -> list[ApprovalRequest]:
        """A run's requests in ``statuses``, their rows locked (in id order, so two lockers
        never deadlock) and read fresh; a row that left ``statuses`` while we waited is
        skipped."""
        return self.load_locked(self._lock_ids_of_run(run_id, statuses=statuses))

    def _lock_ids_of_run(self, run_id: str, *, statuses: tuple[RequestStatus, ...]) -> list[str]:
        # One Core statement, which every run's end sends and most find nothing with. FOR NO
        # KEY UPDATE: a status is no key, and a digest's items referencing these rows (a key
        # share lock each) are not waited on.
        values = {"open_run": run_id, "open_statuses": list(statuses)}
        return list(self.session.connection().execute(_OPEN_OF_RUN, values).scalars().all())

    def load_locked(self, ids: Sequence[str]) -> list[ApprovalRequest]:
        """Requests whose rows this transaction locked, read fresh (none: no statement)."""
        if not ids:
            return []
        stmt = (
            select(ApprovalRequest)
            .where(ApprovalRequest.id.in_(ids))
            .order_by(ApprovalRequest.id)
            .options(selectinload(ApprovalRequest.actions).selectinload(Action.decisions))
            .execution_options(populate_existing=True)
        )
        return list(self.session.scalars(stmt))

    def mark_reminded(self, request_id: str, *, now: dt.datetime) -> bool:
        """Only one replica sends a request's reminder: the one whose update wins."""
        result = self.session.execute(
            update(ApprovalRequest)
            .where(
                ApprovalRequest.id == request_id,
                ApprovalRequest.reminded_at.is_(None),
                ApprovalRequest.status == RequestStatus.PENDING,
            )
            .values(reminded_at=now)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def finish(self, request: ApprovalRequest, *, status: str, outcome: str) -> None:
        for name, value in _ended(status, outcome).items():
            setattr(request, name, value)

    def close(
        self,
        request_id: str,
        *,
        status: str,
        outcome: str,
        run_end: tuple[str, str] | None = None,
    ) -> Closed | None:
        """Record a claimed request's end in one statement, which takes its row lock too (on
        PostgreSQL an update that waited for the lock checks its condition again on the row
        as committed). Only a request still resuming is closed: None, and nothing written,
        if it is gone, or a cancel closed it first, or a process that took its claim over
        recorded its end first; what was recorded first stands. ``run_end`` (status, text):
        its run ends too, with its other pending approvals locked; on PostgreSQL all in the
        same statement (``store.request_end``).

        Core statements on the transaction's connection, as are the statements of a
        decision's transaction that load no objects: through the ORM each costs about twice
        the CPU."""
        conn = self.session.connection()
        values: dict[str, object] = {"closing": request_id, "status": status, "at": utcnow()}
        values["outcome"] = clean_text(outcome)
        if run_end is not None and conn.dialect.name == "postgresql":
            end = {"end": run_end[0], "text": clean_text(run_end[1])}
            found = conn.execute(CLOSE_WITH_ITS_RUN, {**values, **end}).one_or_none()
            if found is None:
                return None
            row = found._mapping
            run = (
                RunRecord(*(row[c] for c in RUN_COLUMNS))
                if row[RUN_COLUMNS[0]] is not None
                else None
            )
            card = CardPlace(channel=row["card_channel"], ts=row["card_ts"])
            return Closed(card, others=tuple(row["others"] or ()), run=run)
        closed = conn.execute(CLOSE, values).one_or_none()
        if closed is None:
            return None
        card = CardPlace(channel=closed.card_channel, ts=closed.card_ts)
        if run_end is None:
            return Closed(card)
        # SQLite: its write lock, held since the update, covers every row
        others = self._lock_ids_of_run(closed.run_id, statuses=(RequestStatus.PENDING,))
        run_now = RunRepository(self.session).finish(
            closed.run_id, status=run_end[0], result_text=run_end[1]
        )
        return Closed(card, others=tuple(others), run=run_now)

    def decide_action(self, action: Action, **changes: object) -> None:
        """Write an action's decided fields (``outcome``, ``edited_args``, ``current_hash``)
        now, as one Core statement, and make ``action`` say so with nothing left for the ORM
        to write; its review slots are rewritten at the commit when its outcome changed. Not
        inside a savepoint: one rolled back would leave ``action`` saying what it wrote."""
        fields = _action_update(tuple(sorted(changes)))
        self.session.connection().execute(fields, {"decided_action": action.id, **changes})
        for name, value in changes.items():
            set_committed_value(action, name, value)
        if "outcome" in changes:
            pending_slots.action_changed(
                self.session, action_id=action.id, request_id=action.request_id
            )
