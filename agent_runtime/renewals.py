"""Leases renewed while their work runs, by threads every lease shares: a thread of its own for
each lease would be started and joined on every click, and on a busy interpreter the start waits
for the new thread's first turn. One thread keeps the times; the renewals run on a few worker
threads, so one renewal that waits (for a pooled connection, a row lock) holds up no other.
All are daemon threads that end once idle for a while: nothing waits for them at exit, and an
instance nobody uses any more leaves none behind."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

Renew = Callable[[], bool]
"""Extends one lease; ``False`` if its holder lost it (taken over), which no renewal wins back."""
RENEWING_THREADS = 4
IDLE_SECONDS = 60.0
"""How long a thread with nothing to do waits before it ends (a new lease starts it again)."""


@dataclass(eq=False)
class _Lease:
    key: object
    renew: Renew
    lost: Callable[[], None]
    due: float
    renewing: bool = False


class Renewals:
    """Renews each lease kept with it every ``every`` seconds until its ``with`` block ends.
    One renewal that fails is logged and tried again at the next round; one that finds the
    lease lost calls its ``lost`` once and renews it no more. A lease whose renewal is still
    under way is not renewed again meanwhile."""

    def __init__(self, *, every: float, name: str, idle: float = IDLE_SECONDS) -> None:
        if every <= 0:
            raise ValueError(f"leases are renewed every {every} s: it must be more than 0")
        self.every = every
        self.name = name
        self.idle = idle
        self._leases: set[_Lease] = set()
        self._queue: deque[_Lease] = deque()
        self._changed = threading.Condition()
        self._timing = False
        self._workers = 0
        self._waiting = 0  # workers waiting for a lease to renew

    @contextmanager
    def kept(self, key: object, renew: Renew, *, lost: Callable[[], None]) -> Iterator[None]:
        """Renew ``key``'s lease while the body runs (first after ``every`` seconds). Raises
        RuntimeError, and the body does not run, if no thread could be started to keep the
        time: no work goes on without its lease."""
        lease = _Lease(key, renew, lost, time.monotonic() + self.every)
        with self._changed:
            if not self._timing and not self._start(self._keep_time, "timer"):
                raise RuntimeError(f"no thread to renew the lease of {key}")
            self._timing = True
            # Every lease waiting to be renewed is due no later than this one: the time
            # keeper, waiting for the earliest, needs no wake-up (each is a thread switch on
            # the caller's path, a click's say). Unless it waits for none at all.
            idle = all(held.renewing for held in self._leases)
            self._leases.add(lease)
            if idle:
                self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._leases.discard(lease)

    def _start(self, target: Callable[[], None], role: str) -> bool:
        """A daemon thread; ``False`` if none could be started (the next lease or round tries
        again)."""
        try:
            threading.Thread(target=target, name=f"{self.name}-{role}", daemon=True).start()
        except RuntimeError:  # e.g. "can't start new thread"
            logger.exception("could not start a thread to renew leases (%s)", self.name)
            return False
        return True

    def _keep_time(self) -> None:
        """Hands each due lease to a worker; ends once there has been no lease for ``idle``.
        A round that fails is logged, and its queued leases are due again at the next."""
        with self._changed:
            try:
                while self._round():
                    pass
            finally:
                self._timing = False
                self._no_worker_left()

    def _round(self) -> bool:
        try:
            return self._hand_over_due()
        except Exception:
            logger.exception("could not hand over the leases of %s; trying again", self.name)
            self._no_worker_left()
            self._changed.wait(self.every)
            return True

    def _no_worker_left(self) -> None:
        """Under ``_changed``: leases queued with no worker to renew them are due again."""
        if self._workers:
            return
        for lease in self._queue:
            lease.renewing = False
        self._queue.clear()

    def _hand_over_due(self) -> bool:
        """Under ``_changed``: wait for due leases and queue them; ``False`` if idle too long."""
        now = time.monotonic()
        due = [lease for lease in self._leases if lease.due <= now and not lease.renewing]
        for lease in due:
            lease.due, lease.renewing = now + self.every, True
            self._queue.append(lease)
        if due:
            self._add_workers(len(self._queue) - self._waiting)
            self._no_worker_left()  # none to renew them: they are due again next round
            self._changed.notify_all()
            return True
        if not self._leases:
            return self._changed.wait(self.idle) or bool(self._leases)
        waiting = [lease.due for lease in self._leases if not lease.renewing]
        self._changed.wait(min(waiting) - now if waiting else None)
        return True

    def _add_workers(self, wanted: int) -> None:
        """Under ``_changed``: up to ``wanted`` more workers, within ``RENEWING_THREADS`` (the
        ones busy renewing may be waiting on something)."""
        while wanted > 0 and self._workers < RENEWING_THREADS:
            self._workers += 1
            started = False
            try:
                started = self._start(self._work, "worker")
            finally:
                if not started:
                    self._workers -= 1
            if not started:
                return
            wanted -= 1

    def _work(self) -> None:
        idle = False
        try:
            while (lease := self._next()) is not None:
                self._renew(lease)
            idle = True  # ``_next`` counted this worker out
        finally:
            if not idle:  # ended by what no renewal may raise (e.g. SystemExit)
                with self._changed:
                    self._workers -= 1
                    self._changed.notify_all()

    def _next(self) -> _Lease | None:
        """The next lease to renew; ``None`` (and this worker ends) once idle for ``idle``."""
        with self._changed:
            self._waiting += 1
            try:
                if not self._changed.wait_for(lambda: self._queue, timeout=self.idle):
                    self._workers -= 1
                    return None
                return self._queue.popleft()
            finally:
                self._waiting -= 1

    def _renew(self, lease: _Lease) -> None:
        try:
            kept = self._still_kept(lease) and lease.renew()
            if not kept and self._forget(lease):
                lease.lost()
        except Exception:
            logger.exception("could not renew the lease of %s; trying again", lease.key)
        finally:
            with self._changed:
                lease.renewing = False
                self._changed.notify_all()

    def _still_kept(self, lease: _Lease) -> bool:
        with self._changed:
            return lease in self._leases

    def _forget(self, lease: _Lease) -> bool:
        """Stop renewing a lease found lost; ``False`` if its work ended meanwhile (done, or
        given back): then nothing was lost."""
        with self._changed:
            if lease not in self._leases:
                return False
            self._leases.discard(lease)
            return True
