"""Waking inbox workers without a stampede.

Every stored click rings once in the process that stored it (on PostgreSQL, its NOTIFY rings
in the other processes). A ring wakes one idle worker, not all of them: each woken worker opens a
claiming transaction, and waking eight workers for one click cost seven empty transactions. A
ring nobody was waiting for is kept (up to ``keep``), so a worker that was busy when it rang
still looks; a worker that finds an item goes on claiming until there is none, so a burst needs
no more rings than workers.
"""

from __future__ import annotations

import threading


class Doorbell:
    def __init__(self, *, keep: int = 16) -> None:
        self._cond = threading.Condition()
        self._rings = 0
        self._keep = keep
        self._closed = False

    def ring(self) -> None:
        with self._cond:
            self._rings = min(self._rings + 1, self._keep)
            self._cond.notify()

    def wait(self, timeout: float) -> bool:
        """Until a ring (``True``, and the ring is used up), the bell closes, or ``timeout``."""
        with self._cond:
            if not self._rings and not self._closed:
                self._cond.wait(timeout)
            if self._rings:
                self._rings -= 1
                return True
            return self._closed

    def close(self) -> None:
        """Wake every waiter, now and later, until ``reopen``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def reopen(self) -> None:
        with self._cond:
            self._closed = False
            self._rings = 0
