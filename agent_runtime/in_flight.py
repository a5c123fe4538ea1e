"""Approved actions whose effect is running in this process: the store cannot tell a call cut
short by a crash (whose replay may run it again, under the same key) from the same call still
running here (a model that sent one tool-call id twice in a message, whose two calls a tool
node runs at once). One run's calls run in one process at a time (its thread lock) with the
bot's own runtime; a LangGraph Server may run a run again elsewhere, which this cannot see."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

STALE_AFTER = 15 * 60.0
"""Seconds after which an action taken and never given back (a call cancelled on its way
out, say) may be taken again: a call still running by then is not told apart from one cut
short."""


class InFlight:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._running: dict[str, float] = {}
        self._lock = threading.Lock()

    def take(self, action_id: str) -> bool:
        """Whether this caller may run the action's effect now: no other call in this process
        is running it (or the one that took it has not given it back for ``STALE_AFTER``)."""
        with self._lock:
            now = self.clock()
            taken = self._running.get(action_id)
            if taken is not None and now - taken < STALE_AFTER:
                return False
            self._running[action_id] = now
            return True

    def release(self, action_id: str) -> None:
        with self._lock:
            self._running.pop(action_id, None)
