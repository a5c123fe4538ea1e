"""Storing clicks before their ack, many at once: a group commit.

Under a burst every listener thread would otherwise open its own short transaction and wait for
a connection, a commit and a NOTIFY of its own. One writer thread takes what is queued, stores
it in one transaction and wakes each waiting listener; a listener acks only once its item is
committed. A listener that gives up waiting before its item was taken withdraws it, so such an
item is answered as busy and never stored. Once taken, the transaction's outcome is the answer,
however late (past Slack's 3 seconds the reviewer sees a timeout, and the click is decided); only
a commit still under way after ``COMMIT_SECONDS`` (a database in trouble) is answered as busy
although it may yet be stored, which is logged as an error.

With a ``Handoff``, as many items as this process has idle inbox workers are stored already
claimed for them and handed over in memory (see ``bot.handoff``)."""

from __future__ import annotations

import datetime as dt
import enum
import logging
import queue
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.handoff import Claimed, Handoff, Reservation
from store.clean import storable
from store.db import Database, refused_for_content
from store.inbox import Held, InboxRepository
from store.inbox_models import InboxKind
from store.models import utcnow

logger = logging.getLogger(__name__)
MAX_BATCH = 64
WAIT_SECONDS = 2.0
"""How long a listener waits for its item to be taken; Slack's ack limit is 3 seconds."""
COMMIT_SECONDS = 30.0
"""A transaction under way is waited for, up to this (the database's own limits come first)."""


class _State(enum.Enum):
    QUEUED = enum.auto()
    TAKEN = enum.auto()
    STORED = enum.auto()
    FAILED = enum.auto()
    WITHDRAWN = enum.auto()


@dataclass
class _Item:
    kind: InboxKind
    payload: dict[str, Any]
    state: _State = _State.QUEUED
    settled: threading.Condition = field(default_factory=threading.Condition)

    def take(self) -> bool:
        with self.settled:
            if self.state is not _State.QUEUED:
                return False
            self.state = _State.TAKEN
            return True

    def settle(self, state: _State) -> None:
        with self.settled:
            self.state = state
            self.settled.notify_all()


class InboxWriter:
    def __init__(
        self, db: Database, *, wait: float = WAIT_SECONDS, handoff: Handoff | None = None
    ) -> None:
        self.db = db
        self.wait = wait
        self.handoff = handoff
        self.origin = uuid.uuid4().hex
        """Names this writer on the NOTIFY of what it stored (see ``InboxRepository.add_many``)."""
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="inbox-writer", daemon=True)
        self._thread.start()

    def write(self, kind: InboxKind, payload: dict[str, Any]) -> bool:
        """Store one item; ``True`` once it is committed, ``False`` if it was not stored.
        Stored, and handed over, cleaned as the store keeps text (``storable``)."""
        try:
            item = _Item(kind, storable(payload))
        except (TypeError, ValueError, RecursionError):  # not JSON: the store cannot take it
            logger.exception("an inbox item is not JSON; answering busy")
            return False
        self._queue.put(item)
        with item.settled:
            item.settled.wait_for(lambda: item.state is not _State.QUEUED, timeout=self.wait)
            if item.state is _State.QUEUED:
                item.state = _State.WITHDRAWN
                return False
            # Taken: its transaction is under way; its outcome is the answer.
            item.settled.wait_for(
                lambda: item.state in (_State.STORED, _State.FAILED), timeout=COMMIT_SECONDS
            )
            if item.state is _State.TAKEN:
                logger.error("an inbox write outlasted %ss; answering busy", COMMIT_SECONDS)
            return item.state is _State.STORED

    def waiting(self) -> int:
        """Items queued and not yet taken (approximate): the depth of the ack path's queue."""
        return self._queue.qsize()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(more)
            self._store([item for item in batch if item.take()])

    def _store(self, batch: list[_Item]) -> None:
        if not batch:
            return
        reservation = self.handoff.reserve(len(batch)) if self.handoff is not None else None
        now = utcnow()
        held = (
            Held(reservation.owner, now + reservation.lease, reservation.count)
            if reservation is not None
            else None
        )
        try:
            with self.db.single() as s:  # one statement: its own transaction on PostgreSQL
                ids = InboxRepository(s).add_many(
                    [(item.kind, item.payload) for item in batch],
                    origin=self.origin,
                    held=held,
                    now=now,
                )
        except Exception as exc:
            if reservation is not None:
                assert self.handoff is not None
                self.handoff.cancel(reservation)
            # One item the store refuses must not fail the others; a database that is down
            # is not asked once per item.
            alone = len(batch) > 1 and refused_for_content(exc)
            if not alone:
                logger.exception("could not store %d inbox item(s)", len(batch))
                for item in batch:
                    item.settle(_State.FAILED)
                return
            logger.warning(
                "the store refused %d inbox items stored together (%s); storing them one at a time",
                len(batch),
                type(exc).__name__,
            )
        else:
            undelivered = self._hand_over(reservation, batch, ids, now=now)
            for item in batch:
                item.settle(_State.STORED)
            if undelivered:
                self._queue_again(undelivered, owner=reservation.owner if reservation else "")
            return
        for item in batch:  # out of the handler: a failure alone does not log the batch's
            self._store([item])

    def _hand_over(
        self,
        reservation: Reservation | None,
        batch: list[_Item],
        ids: list[int],
        *,
        now: dt.datetime,
    ) -> list[int]:
        """Give the items stored claimed to the idle workers; the ids of those not given."""
        if reservation is None or self.handoff is None:
            return []
        handed = [
            Claimed(item_id, item.kind, dict(item.payload), 1, now)
            for item_id, item in zip(ids, batch[: reservation.count], strict=False)
        ]
        if self.handoff.deliver(reservation, handed):
            return []
        return [claimed.id for claimed in handed]

    def _queue_again(self, item_ids: list[int], *, owner: str) -> None:
        """The pool stopped before its items were handed over: queue them for any worker. If
        even that fails, they are claimed again once their lease runs out."""
        try:
            with self.db.transaction() as s:
                InboxRepository(s).release(item_ids, owner=owner)
        except Exception:
            logger.exception("could not queue again %d inbox item(s)", len(item_ids))
