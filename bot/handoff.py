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
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

RESERVATION_WAIT = 2.0
"""Seconds a waking worker waits for a batch being stored for it before it claims other work
(the writer's commit takes milliseconds)."""
FRESH_SECONDS = 1.0
"""How long after its reservation a handed item is worked on the lease it was stored with (at
most a quarter of that lease); a later one is first taken again with a conditional update."""


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
    """Up to ``count`` of a batch go, claimed by ``owner`` for ``lease``, to idle workers.
    ``at``: the hand-off's clock when reserved, before the stored lease was computed."""

    owner: str
    lease: dt.timedelta
    count: int
    at: float


@dataclass(frozen=True)
class Taken:
    """A handed item for a worker. ``late``: taken past its fresh window, so its stored lease
    may be nearly spent or even lapsed and claimed again: the worker must first keep it with
    a conditional update (``InboxRepository.keep_handed``) and drop it if that fails."""

    item: Claimed
    late: bool


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
            return Reservation(self._owner, self._lease, count, at=self.clock())

    def deliver(self, reservation: Reservation, items: list[Claimed]) -> bool:
        """Give the stored items to the workers; ``False`` (nothing given) if the pool closed
        or changed since the reservation: the caller must queue them again."""
        with self._cond:
            self._reserved -= reservation.count
            self._cond.notify_all()
            if self._owner != reservation.owner:
                return False
            # Nothing renews a stored lease until a worker takes the item: past a short
            # window, counted from before the lease was computed, the item is late.
            window = min(FRESH_SECONDS, reservation.lease.total_seconds() / 4)
            self._pending.extend((reservation.at + window, item) for item in items)
            return True

    def cancel(self, reservation: Reservation) -> None:
        """The reserved items were not stored."""
        with self._cond:
            self._reserved -= reservation.count
            self._cond.notify_all()

    def take(self) -> Taken | None:
        """An item handed over and not yet taken by a worker. A batch being stored for idle
        workers is waited for (briefly): the worker that woke may be the one it counts on,
        and must not go and claim other work meanwhile."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._pending or self._reserved <= 0, timeout=RESERVATION_WAIT
            )
            if not self._pending:
                return None
            fresh_until, item = self._pending.popleft()
            self._cond.notify_all()
            return Taken(item, late=self.clock() >= fresh_until)

    def _free(self) -> int:
        return self._idle - self._reserved - len(self._pending)
