"""A chain's head as one transaction extends it: read once under the head's row lock, with ids
for the events; advanced in memory by each event; written once, with the events still unwritten,
when the transaction commits (``audit_rows``).

The transaction's events are written at the commit, or earlier when a query of the session
could read them. Savepoints are followed here, since the events are not in the session: a
savepoint that rolls back takes with it the events recorded in it and undoes the writes made
in it (those events are written again); if the head's row lock was taken in it, the lock went
with it, and the next append locks and reads the head again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event as orm_event
from sqlalchemy.orm import ORMExecuteState, Session, SessionTransaction

from store.audit_chain import head_mac
from store.audit_models import AuditEvent, AuditHead
from store.audit_rows import more_ids, write
from store.db import HighWater, innermost

logger = logging.getLogger("store.audit_log")

_TIP_INFO = "audit_tip"  # ``Session.info``: the chain tip of the session's transaction
_QUERIES_INFO = "audit_tip_queries"  # ``Session.info``: the session's queries write events first


def _within(transaction: SessionTransaction, ancestor: SessionTransaction) -> bool:
    here: SessionTransaction | None = transaction
    while here is not None:
        if here is ancestor:
            return True
        here = here.parent
    return False


@dataclass
class Appended:
    """An event of the transaction: where it was recorded, and where it was written (None:
    not yet, or undone by a savepoint's rollback)."""

    event: AuditEvent
    recorded_in: SessionTransaction
    written_in: SessionTransaction | None = None


@dataclass
class ChainTip:
    """The head as read under its lock (``base_*``) plus this transaction's events."""

    transaction: SessionTransaction
    locked_in: SessionTransaction
    shard: int
    keyed_from: int | None
    base_count: int
    base_hash: str
    key: bytes | None
    seen: HighWater
    ids: list[int]
    appended: list[Appended] = field(default_factory=list)
    written: tuple[int, int] | None = None
    taken: int = 0
    released: list[SessionTransaction] = field(default_factory=list)  # savepoints released

    @classmethod
    def of(
        cls,
        session: Session,
        head: AuditHead,
        *,
        ids: list[int],
        key: bytes | None,
        seen: HighWater,
    ) -> ChainTip:
        transaction = session.get_transaction()
        assert transaction is not None
        return cls(
            transaction=transaction,
            locked_in=innermost(session),
            shard=head.id,
            keyed_from=head.keyed_from,
            base_count=head.event_count,
            base_hash=head.last_hash,
            key=key,
            seen=seen,
            ids=ids,
        )

    @property
    def keyed(self) -> bool:
        return self.keyed_from is not None

    @property
    def count(self) -> int:
        return self.base_count + len(self.appended)

    @property
    def last_hash(self) -> str:
        return self.appended[-1].event.hash if self.appended else self.base_hash

    def next_id(self, session: Session) -> int:
        """An id above every one this chain holds: taken with the lock, or more under it."""
        if not self.ids:
            self.ids = more_ids(session.connection(), after=self.taken)
        self.taken = self.ids.pop(0)
        return self.taken

    def append(self, session: Session, event: AuditEvent) -> None:
        self.appended.append(Appended(event, recorded_in=innermost(session)))

    def rolled_back(self, savepoint: SessionTransaction) -> bool:
        """Forget what ``savepoint`` undid; ``True`` if it took the head's lock with it."""
        self.written = None
        if _within(self.locked_in, savepoint):
            return True
        self.appended = [a for a in self.appended if not _within(a.recorded_in, savepoint)]
        for kept in self.appended:
            if kept.written_in is not None and _within(kept.written_in, savepoint):
                kept.written_in = None
        return False

    def head_values(self) -> dict[str, Any]:
        last = self.appended[-1].event
        values: dict[str, Any] = {
            "event_count": self.count,
            "last_event_id": last.id,
            "last_hash": last.hash,
        }
        mac = ""
        if self.keyed and self.key is not None:
            mac = head_mac(AuditHead(id=self.shard, keyed_from=self.keyed_from, **values), self.key)
        return {"shard": self.shard, **values, "mac": mac}


def held_tip(session: Session, shard: int) -> ChainTip | None:
    """The tip this transaction holds for ``shard``, with the head's lock still held."""
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is None or tip.transaction is not session.get_transaction() or tip.shard != shard:
        return None
    return tip


def hold(session: Session, tip: ChainTip) -> None:
    """Keep the tip for the transaction, to be written when it commits. The commit and
    rollback hooks below are every session's (cheap for one that appends nothing); the query
    hook is this session's only, since every ORM query would pay for it."""
    session.info[_TIP_INFO] = tip
    if not session.info.get(_QUERIES_INFO):
        orm_event.listen(session, "do_orm_execute", _before_query)
        session.info[_QUERIES_INFO] = True


def _current(session: Session) -> ChainTip | None:
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is None or tip.transaction is not session.get_transaction():
        return None
    return tip


@orm_event.listens_for(Session, "before_commit")
def _before_commit(session: Session) -> None:
    tip = _current(session)
    releasing = session.get_nested_transaction()
    if tip is not None and releasing is not None:
        tip.released.append(releasing)
    write_tip(session)


@orm_event.listens_for(Session, "after_soft_rollback")
def _rolled_back(session: Session, previous: SessionTransaction) -> None:
    """``previous`` may be a flush's subtransaction: what the database rolled back is the
    savepoint or transaction around it."""
    undone = previous
    while undone.parent is not None and not undone.nested:
        undone = undone.parent
    _undo(session, undone)


@orm_event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction) -> None:
    """A savepoint that ends without being released was rolled back (a failed flush inside
    it, or ``close()``, says so with no rollback event of its own); the transaction's end
    forgets its tip."""
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is None:
        return
    if transaction.nested and not any(t is transaction for t in tip.released):
        _undo(session, transaction)
    elif transaction is tip.transaction:
        del session.info[_TIP_INFO]


def _undo(session: Session, undone: SessionTransaction) -> None:
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is not None and tip.rolled_back(undone):
        del session.info[_TIP_INFO]


@orm_event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    """Once the transaction (not a savepoint inside it) committed, its events are durable:
    the high-water mark counts what was written and the log shows it."""
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is None or session.get_nested_transaction() is not None:
        return  # nothing appended, or a savepoint was released: it may still roll back
    if session.get_transaction() is not tip.transaction:
        return
    del session.info[_TIP_INFO]
    if not tip.appended:
        return
    unwritten = [a.event.kind for a in tip.appended if a.written_in is None]
    if unwritten or tip.written != (tip.count, tip.appended[-1].event.id):
        logger.error("audit events recorded after the commit's write were lost: %s", unwritten)
    if tip.written is not None:
        tip.seen.saw(tip.written[0], tip.shard)
    for appended in tip.appended:
        if appended.written_in is None:
            continue
        event = appended.event
        ids = {"event": event.kind, "outcome": event.outcome}
        for name, value in (
            ("run_id", event.run_id),
            ("request_id", event.request_id),
            ("action_id", event.action_id),
            ("actor", event.actor_id),
        ):
            if value is not None:
                ids[name] = value
        logger.info("audit %s (%s)", event.kind, event.outcome, extra=ids)


def _before_query(state: ORMExecuteState) -> None:
    """A query of the session sees the transaction's events, as it would see any row the
    session added (the head is still written once, at the commit)."""
    write_events(state.session)


def write_events(session: Session) -> None:
    """Write the events not written yet, without the head."""
    tip = _current(session)
    if tip is not None and any(a.written_in is None for a in tip.appended):
        _write(session, tip, head=False)


def write_tip(session: Session) -> None:
    """Write the transaction's events not written yet and its head, if they moved it: on
    PostgreSQL in one statement. Runs before each commit (a savepoint's too, so the head never
    lags what commits) and before the heads are read."""
    tip = _current(session)
    if tip is None or not tip.appended:
        return
    if tip.written == (tip.count, tip.appended[-1].event.id):
        return
    _write(session, tip, head=True)


def _write(session: Session, tip: ChainTip, *, head: bool) -> None:
    unwritten = [a for a in tip.appended if a.written_in is None]
    values = tip.head_values() if head else None
    write(session.connection(), [a.event for a in unwritten], head=values)
    here = innermost(session)
    for appended in unwritten:
        appended.written_in = here
    if values is not None:
        tip.written = (values["event_count"], values["last_event_id"])
