"""Appending to, checking and sealing the audit log (the chain itself is in ``audit_chain``)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
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
from store.audit_models import AUDIT_SHARDS, AuditEvent, AuditHead
from store.audit_rows import ids_problem, lock_head
from store.audit_tip import ChainTip, held_tip, hold, write_tip
from store.audit_verify import heads_problem, verify
from store.clean import clean_json, clean_text
from store.db import AUDIT_KEY_INFO, AUDIT_SEEN_INFO, HighWater, in_single_unit
from store.models import utcnow

logger = logging.getLogger(__name__)

_SHARD_INFO = "audit_shard"  # ``Session.info``: the transaction and the chain it appends to


@dataclass(frozen=True)
class Seal:
    """What ``seal`` did: how many earlier events the key now anchors, or that it was done."""

    events: int
    already: bool
    last_hash: str = ""


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
        """Append an event to its chain. Its ``id`` is taken with the chain's lock; it is
        written with the transaction's other events and the head, before the commit, or
        before a query of the session (``audit_tip``)."""
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
        tip = self._locked_head(self._shard_for(event))
        event.id = tip.next_id(self.session)
        event.shard = tip.shard
        event.created_at = utcnow()
        event.prev_hash = tip.last_hash
        event.hash = digest(event.prev_hash, event, key=self.key if tip.keyed else None)
        tip.append(self.session, event)
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

    def _locked_head(self, shard: int) -> ChainTip:
        """Take the chain's turn, read its head and take ids for the events in one statement:
        on PostgreSQL a row lock on the head (``FOR UPDATE`` waits for the chain's other
        writer, then reads the head it committed); SQLite's write lock (BEGIN IMMEDIATE)
        already makes appends take turns. A head that does not hold with our key is never
        extended: that would sign it.

        New events link to the head, not to the newest row: if rows were removed behind the
        bot's back, the next event's link shows it for good."""
        held = held_tip(self.session, shard)
        if held is not None:
            # This transaction already holds the chain's turn and is its only writer: the tip
            # it extends is current (one whose lock a rolled-back savepoint took is not kept).
            return held
        if in_single_unit(self.session):
            raise RuntimeError(
                "an audit append locks its chain's head and writes at the commit (two "
                "statements, not atomic in a Database.single unit); use Database.transaction"
            )
        # Lock order: the rows the transaction changed so far, then the chain's head. Rows
        # changed through the ORM are written now, not at the commit after the head's lock
        # (a row changed after the first append is written at the commit: lock it before).
        self.session.flush()
        locked = lock_head(self.session.connection(), shard)
        head = None if locked is None else locked[0]
        problem = head_problem(head, self.key)
        if problem is not None or locked is None:
            raise AuditChainError(f"audit log: {in_shard(shard, str(problem))}")
        self._check_not_rolled_back(locked[0])
        tip = ChainTip.of(self.session, locked[0], ids=locked[1], key=self.key, seen=self.seen)
        hold(self.session, tip)
        return tip

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

    def head(self, shard: int = 0) -> AuditHead | None:
        write_tip(self.session)  # this transaction's events are in the head it reads
        return self.session.get(AuditHead, shard, populate_existing=True)

    def heads(self, *, lock: bool = False) -> list[AuditHead]:
        """Every head, in id order; ``lock``: row-locked in that order, each read once its
        chain's writer committed (what ``seal`` needs)."""
        write_tip(self.session)
        stmt = select(AuditHead).order_by(AuditHead.id)
        if lock:
            stmt = stmt.with_for_update()
        return list(self.session.scalars(stmt.execution_options(populate_existing=True)))

    def check_key(self) -> None:
        """At start-up: refuse a key that does not fit the log (or no key for a keyed log),
        and ids that would not keep a chain's order."""
        heads = self.heads()
        problem, unsealed = heads_problem({head.id: head for head in heads}, self.key)
        if problem is None and unsealed:
            problem = UNSEALED
        problem = problem or ids_problem(self.session.connection())
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
        heads = self.heads(lock=True)  # appends wait for the seal, and it for them
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
