"""A chain's head as one transaction extends it: read once under the head's row lock, advanced
in memory by each event, and written once, when the transaction commits.

The events of the transaction are the tip's own list, filtered by what is still in the
session: a savepoint that rolls back takes its events out of the session, so the tip no
longer counts them. If it took the first of them, the row lock was taken in that savepoint
and went with it: the tip is stale, and the next append locks and reads the head again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy import event as orm_event
from sqlalchemy.orm import Session, SessionTransaction

from store.audit_chain import head_mac
from store.audit_models import AuditEvent, AuditHead

_WRITE_HEAD = (
    update(AuditHead)
    .where(AuditHead.id == bindparam("shard"))
    .values(
        {name: bindparam(name) for name in ("event_count", "last_event_id", "last_hash", "mac")}
    )
)
"""Built once, for every transaction that appends (the values go as parameters)."""

_TIP_INFO = "audit_tip"  # ``Session.info``: the chain tip of the session's transaction
_HOOKED_INFO = "audit_tip_hooked"  # ``Session.info``: the session writes its tip on commit


@dataclass
class ChainTip:
    """The head as read under its lock (``base_*``) plus this transaction's events."""

    transaction: SessionTransaction
    shard: int
    keyed_from: int | None
    base_count: int
    base_last_id: int | None
    base_hash: str
    key: bytes | None
    events: list[AuditEvent] = field(default_factory=list)
    written: tuple[int, int | None] | None = None

    @classmethod
    def of(cls, head: AuditHead, *, transaction: SessionTransaction, key: bytes | None) -> ChainTip:
        return cls(
            transaction=transaction,
            shard=head.id,
            keyed_from=head.keyed_from,
            base_count=head.event_count,
            base_last_id=head.last_event_id,
            base_hash=head.last_hash,
            key=key,
        )

    @property
    def keyed(self) -> bool:
        return self.keyed_from is not None

    @property
    def count(self) -> int:
        return self.base_count + len(self.events)

    @property
    def last_hash(self) -> str:
        return self.events[-1].hash if self.events else self.base_hash

    def prune(self, session: Session) -> None:
        """Forget the events a rolled-back savepoint took out of the session."""
        self.events = [e for e in self.events if e in session]


def held_tip(session: Session, shard: int) -> ChainTip | None:
    """The tip this transaction holds for ``shard``, unless it is stale (see the module)."""
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is None or tip.transaction is not session.get_transaction() or tip.shard != shard:
        return None
    tip.prune(session)
    return tip if tip.events else None


def hold(session: Session, tip: ChainTip) -> None:
    """Keep the tip for the transaction, to be written when it commits."""
    session.info[_TIP_INFO] = tip
    if not session.info.get(_HOOKED_INFO):
        orm_event.listen(session, "before_commit", write_tip)
        orm_event.listen(session, "after_soft_rollback", _forget_written)
        session.info[_HOOKED_INFO] = True


def _forget_written(session: Session, _previous: SessionTransaction) -> None:
    """A rolled-back savepoint may have undone a head write: write it again at the end."""
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is not None:
        tip.written = None


def write_tip(session: Session) -> None:
    """Write the transaction's head if its events moved it: flush them for their ids, then one
    UPDATE. Runs before each commit (a savepoint's too, so the head never lags what commits)
    and before the heads are read."""
    tip: ChainTip | None = session.info.get(_TIP_INFO)
    if tip is None or tip.transaction is not session.get_transaction():
        return
    tip.prune(session)
    if not tip.events:
        return
    session.flush()
    last = tip.events[-1]
    if tip.written == (tip.count, last.id):
        return
    values: dict[str, Any] = {
        "event_count": tip.count,
        "last_event_id": last.id,
        "last_hash": last.hash,
    }
    if tip.keyed and tip.key is not None:
        values["mac"] = head_mac(
            AuditHead(id=tip.shard, keyed_from=tip.keyed_from, **values), tip.key
        )
    else:
        values["mac"] = ""
    session.connection().execute(_WRITE_HEAD, {"shard": tip.shard, **values})
    tip.written = (tip.count, last.id)
