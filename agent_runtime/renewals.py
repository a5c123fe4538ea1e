"""Leases renewed while their work runs, all from one thread: a thread of its own for each lease
would be started and joined on every click, and on a busy interpreter the start waits for the
new thread's first turn."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)

Renew = Callable[[], bool]
"""Extends one lease; ``False`` if its holder lost it (taken over), which no renewal wins back."""


@dataclass
class _Lease:
    renew: Renew
    lost: Callable[[], None]
    due: float


class Renewals:
    """Renews each lease kept with it every ``every`` seconds until its ``with`` block ends.
    One renewal that fails is logged and tried again at the next round; one that finds the
    lease lost calls its ``lost`` once and renews it no more."""

    def __init__(self, *, every: float, name: str) -> None:
        self.every = every
        self.name = name
        self._leases: dict[object, _Lease] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def kept(self, key: object, renew: Renew, *, lost: Callable[[], None]) -> Iterator[None]:
        """Renew ``key``'s lease while the body runs (first after ``every`` seconds)."""
        with self._changed:
            self._leases[key] = _Lease(renew, lost, time.monotonic() + self.every)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._leases.pop(key, None)

    def _loop(self) -> None:
        while True:
            for key, lease in self._due():
                self._renew(key, lease)

    def _due(self) -> list[tuple[object, _Lease]]:
        """Waits until some lease is due; those, each now due again ``every`` seconds on."""
        with self._changed:
            while True:
                now = time.monotonic()
                due = [(k, lease) for k, lease in self._leases.items() if lease.due <= now]
                if due:
                    for _key, lease in due:
                        lease.due = now + self.every
                    return due
                soonest = min((lease.due for lease in self._leases.values()), default=None)
                self._changed.wait(None if soonest is None else soonest - now)

    def _renew(self, key: object, lease: _Lease) -> None:
        try:
            kept = lease.renew()
        except Exception:
            logger.exception("could not renew the lease of %s; trying again", key)
            return
        if kept:
            return
        with self._changed:
            if self._leases.get(key) is not lease:
                return  # its work ended meanwhile (done, or given back): nothing was lost
            del self._leases[key]
        lease.lost()
