"""Appending to, checking and sealing the audit log (the chain itself is in ``audit_chain``)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import event as orm_event
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from store.audit_chain import (
    UNSEALED,
    AuditChainError,
    AuditRollbackError,
    ChainReport,
    Expected,
    digest,
    head_mac,
    head_problem,
    in_shard,
)
from store.audit_verify import heads_problem, verify
from store.db import AUDIT_KEY_INFO, AUDIT_SEEN_INFO, HighWater
from store.models import AUDIT_SHARDS, AuditEvent, AuditHead, utcnow

logger = logging.getLogger(__name__)

AUDIT_LOCK_KEY = 0x4A55_4449_545F_4C4F  # the first of the chains' locks, one per shard
_SHARD_INFO = "audit_shard"  # ``Session.info``: the transaction and the chain it appends to
_HEAD_INFO = "audit_head"  # ``Session.info``: the transaction and the chain head it holds


@dataclass(frozen=True)
class Seal:
    """What ``seal`` did: how many earlier events the key now anchors, or that it was done."""

    events: int
    already: bool
    last_hash: str = ""


def clean_text(value: str) -> str:
    """Any Python string as one UTF-8 and PostgreSQL can store: lone surrogates and NUL become
    U+FFFD, so the stored value is the hashed one and verifies (pairs are joined)."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def clean_json(value: Any) -> Any:
    """``clean_text`` over every key and string of a JSON value."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def _clean(value: str | None) -> str | None:
    return None if value is None else clean_text(value)


def shard_of(run_id: str | None, request_id: str | None) -> int:
    """The chain an event goes to: by its run, else its request, else shard 0. A stable hash,
    so every process sends a run's events to the same chain."""
    name = run_id or request_id
    if not name:
        return 0
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4]) % AUDIT_SHARDS


class AuditRepository:
    """Append-only audit log: the record of what happened, not logs or streams.

    The key comes from the session (``Database(audit_key=...)``) unless given here."""

    def __init__(self, session: Session, *, key: bytes | None = None) -> None:
        self.session = session
        self.key: bytes | None = key if key is not None else session.info.get(AUDIT_KEY_INFO)
        self.seen: HighWater = session.info.get(AUDIT_SEEN_INFO) or HighWater()

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
            kind=clean_text(kind),
            outcome=clean_text(outcome),
            actor_id=_clean(actor_id),
            team_id=_clean(team_id),
            run_id=_clean(run_id),
            request_id=_clean(request_id),
            action_id=_clean(action_id),
            reason=_clean(reason),
            detail=clean_json(json.loads(json.dumps(detail or {}, default=str))),
        )
        head = self._locked_head(self._shard_for(event))
        keyed = head.keyed_from is not None
        event.shard = head.id
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
        count, shard, seen = head.event_count, head.id, self.seen
        ids = {
            "event": event.kind,
            "outcome": event.outcome,
            **{
                name: value
                for name, value in (
                    ("run_id", event.run_id),
                    ("request_id", event.request_id),
                    ("action_id", event.action_id),
                    ("actor", event.actor_id),
                )
                if value is not None
            },
        }

        def committed(_session: Session) -> None:
            # An event rolled back with its savepoint is no longer in the session: the head
            # never committed its count, and the high-water mark must not claim it did.
            if inspect(event).persistent:
                seen.saw(count, shard)
                # Logged once durable: the log shows what the audit trail holds.
                logger.info("audit %s (%s)", ids["event"], ids["outcome"], extra=ids)

        orm_event.listen(self.session, "after_commit", committed, once=True)
        return event

    def _shard_for(self, event: AuditEvent) -> int:
        """The event's run's chain; but a transaction keeps to the first chain it took, so it
        holds one chain's turn and two transactions never wait for each other's."""
        self.session.connection()  # the transaction has begun
        transaction = self.session.get_transaction()
        held = self.session.info.get(_SHARD_INFO)
        if held is not None and held[0] is transaction:
            return int(held[1])
        shard = shard_of(event.run_id, event.request_id)
        self.session.info[_SHARD_INFO] = (transaction, shard)
        return shard

    def _locked_head(self, shard: int) -> AuditHead:
        """Take the chain's turn, then read its head fresh. On PostgreSQL a transaction-scoped
        advisory lock per chain makes appends to it take turns; SQLite's write lock (BEGIN
        IMMEDIATE) already does. A head that does not hold with our key is never extended:
        that would sign it.

        New events link to the head, not to the newest row: if rows were removed behind the
        bot's back, the next event's link shows it for good."""
        transaction = self.session.get_transaction()
        held = self.session.info.get(_HEAD_INFO)
        if held is not None and held[0] is transaction and held[1].id == shard:
            # This transaction already holds the chain's turn and is its only writer: the head
            # it read and extended is current (a savepoint rolled back expires it, so it reloads).
            return cast(AuditHead, held[1])
        self._take_turn(shard)
        head = self.head(shard)
        problem = head_problem(head, self.key)
        if problem is not None or head is None:
            raise AuditChainError(f"audit log: {in_shard(shard, str(problem))}")
        self._check_not_rolled_back(head)
        if not self.session.in_nested_transaction():
            # A turn taken inside a savepoint ends with it if it rolls back: not kept.
            self.session.info[_HEAD_INFO] = (transaction, head)
        return head

    def _check_not_rolled_back(self, head: AuditHead) -> None:
        """A head with fewer events than this process saw committed was restored from an older
        copy (hiding newer events, a MAC cannot show that): never extend it."""
        if head.event_count < self.seen.value(head.id):
            problem = (
                f"the head records {head.event_count} events but this process "
                f"already saw {self.seen.value(head.id)}: it was restored from an older copy"
            )
            error = AuditRollbackError(f"audit log: {in_shard(head.id, problem)}")
            logger.error("refusing to append to the audit log: %s", error)
            raise error
        self.seen.saw(head.event_count, head.id)

    def _take_turn(self, *shards: int) -> None:
        if self.session.get_bind().dialect.name == "postgresql":
            for shard in sorted(shards):
                self.session.execute(
                    text("SELECT pg_advisory_xact_lock(:k)"), {"k": AUDIT_LOCK_KEY + shard}
                )

    def head(self, shard: int = 0) -> AuditHead | None:
        return self.session.get(AuditHead, shard, populate_existing=True)

    def heads(self) -> list[AuditHead]:
        stmt = select(AuditHead).order_by(AuditHead.id).execution_options(populate_existing=True)
        return list(self.session.scalars(stmt))

    def check_key(self) -> None:
        """At start-up: refuse a key that does not fit the log (or no key for a keyed log)."""
        heads = self.heads()
        problem, unsealed = heads_problem({head.id: head for head in heads}, self.key)
        if problem is None and unsealed:
            problem = UNSEALED
        if problem is not None:
            raise AuditChainError(f"audit log: {problem}")
        for head in heads:
            self._check_not_rolled_back(head)

    def verify(self, *, expect: Expected | None = None) -> ChainReport:
        return verify(self.iter_all(), heads=self.heads(), key=self.key, expect=expect)

    def seal(self, *, events: int, last_hash: str) -> Seal:
        """Key the heads of a log written without AUDIT_KEY: the events so far are anchored by
        them (the next keyed link of each chain covers its last hash), and every later event
        is keyed.

        Sealing vouches for the log, and nothing in the database tells a log that was never
        keyed from a keyed one rewritten without the key: the operator states what they vouch
        for (``events`` and ``last_hash`` as an ``audit verify`` printed before the key
        existed), and only a log that checks out and matches it is sealed."""
        if self.key is None:
            raise AuditChainError("AUDIT_KEY is required to seal the audit log")
        self._take_turn(*range(AUDIT_SHARDS))
        heads = self.heads()
        if heads and all(head.keyed_from is not None for head in heads):
            self.check_key()
            return Seal(events=sum(h.keyed_from - 1 for h in heads if h.keyed_from), already=True)
        report = verify(self.iter_all(), heads=heads, key=None)
        if report.problem is not None:
            raise AuditChainError(f"audit log broken, not sealing it: {report.problem}")
        if (report.checked, report.last_hash) != (events, last_hash.strip().lower()):
            raise AuditChainError(
                f"audit log not sealed: it is not the log you vouch for ({events} events ending "
                f"at {last_hash.strip() or 'nothing'}); it was changed since that "
                "`audit verify`, or it was keyed and rewritten without the key"
            )
        for head in heads:
            head.keyed_from = head.event_count + 1
            head.mac = head_mac(head, self.key)
        self.session.flush()
        return Seal(events=report.checked, already=False, last_hash=report.last_hash)

    def iter_all(self, *, batch: int = 1000) -> Iterator[AuditEvent]:
        stmt = select(AuditEvent).order_by(AuditEvent.id).execution_options(yield_per=batch)
        yield from self.session.scalars(stmt)

    def for_run(self, run_id: str) -> list[AuditEvent]:
        stmt = select(AuditEvent).where(AuditEvent.run_id == run_id).order_by(AuditEvent.id)
        return list(self.session.scalars(stmt))
