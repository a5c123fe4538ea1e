"""Handing a stored click straight to an idle inbox worker of this process.

A worker that finds nothing to claim says it is idle. The writer, about to store a batch, asks
how many workers are idle and stores that many of its items already claimed by their pool (with
a lease, in the same insert), then delivers them here: the worker that the click's ring wakes
takes one and skips its claiming transaction. The database stays the record: an item handed
over is stored claimed, so if this process dies its lease runs out and another worker claims
it, as for any claim. An item is never kept only in memory: once the pool closes (it is
stopping) nothing is reserved or delivered, and the writer queues again what it could not
deliver; what was delivered before is worked by the workers before they exit.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)
RESERVATION_WAIT = 2.0
"""Seconds a waking worker waits for a batch being stored for it before it claims other work
(the writer's commit takes milliseconds)."""


@dataclass(frozen=True)
class Claimed:
    """What a worker needs of an item claimed for it."""

    id: int
    kind: str
    payload: dict[str, object]
    attempts: int
    created_at: dt.datetime


@dataclass(frozen=True)
class Reservation:
    """Up to ``count`` of a batch go, claimed by ``owner`` for ``lease``, to idle workers."""

    owner: str
    lease: dt.timedelta
    count: int


class Handoff:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._owner: str | None = None  # the open pool's claim owner; None when closed
        self._lease = dt.timedelta(0)
        self._idle = 0
        self._reserved = 0
        self._pending: deque[tuple[float, Claimed]] = deque()  # (fresh until, item)

    def open(self, *, owner: str, lease: dt.timedelta) -> None:
        """The workers of this process, claiming as ``owner``, take hand-offs from now on."""
        with self._cond:
            self._owner, self._lease = owner, lease

    def close(self) -> None:
        """Nothing more is reserved or delivered (the pool is stopping)."""
        with self._cond:
            self._owner = None

    @contextmanager
    def idle(self) -> Iterator[None]:
        """A worker waiting for work (for a ring) while inside."""
        with self._cond:
            self._idle += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._idle -= 1

    def wait_idle(self, count: int, *, timeout: float) -> bool:
        """Until at least ``count`` workers are idle with nothing handed to them."""
        with self._cond:
            return self._cond.wait_for(lambda: self._free() >= count, timeout=timeout)

    def reserve(self, wanted: int) -> Reservation | None:
        """How many of ``wanted`` items idle workers can take at once; None for none."""
        with self._cond:
            count = min(wanted, self._free())
            if count <= 0 or self._owner is None:
                return None
            self._reserved += count
            return Reservation(self._owner, self._lease, count)

    def deliver(self, reservation: Reservation, items: list[Claimed]) -> bool:
        """Give the stored items to the workers; ``False`` (nothing given) if the pool closed
        or changed since the reservation: the caller must queue them again."""
        with self._cond:
            self._reserved -= reservation.count
            self._cond.notify_all()
            if self._owner != reservation.owner:
                return False
            # Worked from memory only well within its stored lease, which nothing renews
            # until a worker takes it: past that, the item is left to the lease running out
            # and a claim like any other, never worked twice.
            fresh_until = self.clock() + reservation.lease.total_seconds() / 2
            self._pending.extend((fresh_until, item) for item in items)
            return True

    def cancel(self, reservation: Reservation) -> None:
        """The reserved items were not stored."""
        with self._cond:
            self._reserved -= reservation.count
            self._cond.notify_all()

    def take(self) -> Claimed | None:
        """An item handed over and not yet taken by a worker. A batch being stored for idle
        workers is waited for (briefly): the worker that woke may be the one it counts on,
        and must not go and claim other work meanwhile."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._pending or self._reserved <= 0, timeout=RESERVATION_WAIT
            )
            while self._pending:
                fresh_until, item = self._pending.popleft()
                self._cond.notify_all()
                if self.clock() < fresh_until:
                    return item
                logger.warning(
                    "inbox item %s waited too long for a worker of this process; it is "
                    "claimed again once its lease runs out",
                    item.id,
                )
            return None

    def _free(self) -> int:
        return self._idle - self._reserved - len(self._pending)
