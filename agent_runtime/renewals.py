"""Leases renewed while their work runs, by threads every lease shares: a thread of its own for
each lease would be started and joined on every click, and on a busy interpreter the start waits
for the new thread's first turn. One thread keeps the times; the renewals run on a few pooled
threads, so one renewal that waits (for a pooled connection, a row lock) holds up no other."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

Renew = Callable[[], bool]
"""Extends one lease; ``False`` if its holder lost it (taken over), which no renewal wins back."""
RENEWING_THREADS = 4


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
    lease lost calls its ``lost`` once and renews it no more. A renewal still under way when
    the next is due lets that one pass."""

    def __init__(self, *, every: float, name: str) -> None:
        if every <= 0:
            raise ValueError(f"leases are renewed every {every} s: it must be more than 0")
        self.every = every
        self.name = name
        self._leases: set[_Lease] = set()
        self._changed = threading.Condition()
        self._timer: threading.Thread | None = None
        self._renewing = ThreadPoolExecutor(RENEWING_THREADS, thread_name_prefix=name)

    @contextmanager
    def kept(self, key: object, renew: Renew, *, lost: Callable[[], None]) -> Iterator[None]:
        """Renew ``key``'s lease while the body runs (first after ``every`` seconds)."""
        lease = _Lease(key, renew, lost, time.monotonic() + self.every)
        with self._changed:
            self._start_timer()
            self._leases.add(lease)
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._leases.discard(lease)

    def _start_timer(self) -> None:
        """Under ``_changed``: a timer that is not running (never started, or ended by a
        failure) is started."""
        if self._timer is not None and self._timer.is_alive():
            return
        timer = threading.Thread(target=self._keep_time, name=f"{self.name}-timer", daemon=True)
        timer.start()
        self._timer = timer

    def _keep_time(self) -> None:
        while True:
            try:
                for lease in self._due():
                    self._renewing.submit(self._renew, lease)
            except Exception:  # e.g. no thread to renew on: the next round tries again
                logger.exception("could not renew the leases of %s; trying again", self.name)
                time.sleep(self.every)

    def _due(self) -> list[_Lease]:
        """Waits until some lease not being renewed is due; those, marked as being renewed."""
        with self._changed:
            while True:
                now = time.monotonic()
                due = [lease for lease in self._leases if lease.due <= now and not lease.renewing]
                for lease in due:
                    lease.due, lease.renewing = now + self.every, True
                if due:
                    return due
                waiting = [lease.due for lease in self._leases if not lease.renewing]
                self._changed.wait(min(waiting) - now if waiting else None)

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
                self._changed.notify()

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
