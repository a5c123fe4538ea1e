"""Appending to, checking and sealing the audit log (the chain itself is in ``audit_chain``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from store.audit_chain import AuditChainError, ChainReport, digest, head_mac, head_problem, verify
from store.db import AUDIT_KEY_INFO
from store.models import AUDIT_HEAD_ID, AuditEvent, AuditHead, utcnow

AUDIT_LOCK_KEY = 0x4A55_4449_545F_4C4F  # one lock for the whole audit chain


@dataclass(frozen=True)
class Seal:
    """What ``seal`` did: how many earlier events the key now anchors, or that it was done."""

    events: int
    already: bool


class AuditRepository:
    """Append-only audit log: the record of what happened, not logs or streams.

    The key comes from the session (``Database(audit_key=...)``) unless given here."""

    def __init__(self, session: Session, *, key: bytes | None = None) -> None:
        self.session = session
        self.key: bytes | None = key if key is not None else session.info.get(AUDIT_KEY_INFO)

    def record(
        self,
        kind: str,
        *,
        outcome: str = "info",
        actor_id: str | None = None,
        team_id: str | None = None,
        run_id: str | None = None,
        request_id: str | None = None,
        action_id: str | None = None,
        reason: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> AuditEvent:
        event = AuditEvent(
            kind=kind,
            outcome=outcome,
            actor_id=actor_id,
            team_id=team_id,
            run_id=run_id,
            request_id=request_id,
            action_id=action_id,
            reason=reason,
            detail=json.loads(json.dumps(detail or {}, default=str)),
        )
        head = self._locked_head()
        keyed = head.keyed_from is not None
        event.created_at = utcnow()
        event.prev_hash = head.last_hash
        event.hash = digest(event.prev_hash, event, key=self.key if keyed else None)
        self.session.add(event)
        self.session.flush()
        head.event_count += 1
        head.last_event_id = event.id
        head.last_hash = event.hash
        head.mac = head_mac(head, self.key) if keyed and self.key is not None else ""
        self.session.flush()
        return event

    def _locked_head(self) -> AuditHead:
        """Take the chain's turn, then read the head fresh. On PostgreSQL a transaction-scoped
        advisory lock makes appends take turns; SQLite's write lock (BEGIN IMMEDIATE) already
        does. A head that does not hold with our key is never extended: that would sign it.

        New events link to the head, not to the newest row: if rows were removed behind the
        bot's back, the next event's link shows it for good."""
        self._take_turn()
        head = self.head()
        problem = head_problem(head, self.key)
        if problem is not None or head is None:
            raise AuditChainError(f"audit log: {problem}")
        return head

    def _take_turn(self) -> None:
        if self.session.get_bind().dialect.name == "postgresql":
            self.session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": AUDIT_LOCK_KEY})

    def head(self) -> AuditHead | None:
        return self.session.get(AuditHead, AUDIT_HEAD_ID, populate_existing=True)

    def check_key(self) -> None:
        """At start-up: refuse a key that does not fit the log (or no key for a keyed log)."""
        problem = head_problem(self.head(), self.key)
        if problem is not None:
            raise AuditChainError(f"audit log: {problem}")

    def verify(self) -> ChainReport:
        return verify(self.iter_all(), head=self.head(), key=self.key)

    def seal(self) -> Seal:
        """Key the head of a log written without AUDIT_KEY: the events so far are anchored by
        it (the next keyed link covers their last hash), and every later event is keyed. Only
        a log that checks out is sealed, since sealing vouches for it."""
        if self.key is None:
            raise AuditChainError("AUDIT_KEY is required to seal the audit log")
        self._take_turn()
        head = self.head()
        if head is not None and head.keyed_from is not None:
            self.check_key()
            return Seal(events=head.keyed_from - 1, already=True)
        report = verify(self.iter_all(), head=head, key=None)
        if report.problem is not None or head is None:
            raise AuditChainError(f"audit log broken, not sealing it: {report.problem}")
        head.keyed_from = head.event_count + 1
        head.mac = head_mac(head, self.key)
        self.session.flush()
        return Seal(events=head.event_count, already=False)

    def iter_all(self, *, batch: int = 1000) -> Iterator[AuditEvent]:
        stmt = select(AuditEvent).order_by(AuditEvent.id).execution_options(yield_per=batch)
        yield from self.session.scalars(stmt)

    def for_run(self, run_id: str) -> list[AuditEvent]:
        stmt = select(AuditEvent).where(AuditEvent.run_id == run_id).order_by(AuditEvent.id)
        return list(self.session.scalars(stmt))
