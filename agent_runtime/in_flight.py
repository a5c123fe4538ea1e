"""Approved actions whose effect is running in this process: the store cannot tell a call cut
short by a crash (whose replay may run it again, under the same key) from the same call still
running here (a model that sent one tool-call id twice in a message, whose two calls a tool
node runs at once). One run's calls run in one process at a time (its thread lock) with the
bot's own runtime; a LangGraph Server may run a run again elsewhere, which this cannot see."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

STALE_AFTER = 15 * 60.0
"""Seconds after which an action taken and never given back (a caller of ``authorize`` that
never called ``finish`` or ``abandon``) may be taken again; never while its effect runs inside
``running``, however long it takes (an infrastructure change may take hours)."""


@dataclass(eq=False)
class Hold:
    """One caller's hold of an action: only that caller gives it back."""

    taken_at: float
    effects: int = 0
    """Effects of this hold running now (``running``): it does not go stale meanwhile."""


class InFlight:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._held: dict[str, Hold] = {}
        self._lock = threading.Lock()

    def take(self, action_id: str) -> Hold | None:
        """This caller's hold, if it may run the action's effect now: no other call in this
        process holds it (or the one that took it has not given it back for ``STALE_AFTER``,
        and its effect is not running)."""
        with self._lock:
            now = self.clock()
            held = self._held.get(action_id)
            if held is not None and (held.effects or now - held.taken_at < STALE_AFTER):
                return None
            hold = self._held[action_id] = Hold(now)
            return hold

    def release(self, action_id: str, hold: Hold | None) -> None:
        """Give back ``hold``; a hold taken over since (it went stale) stays with its taker."""
        with self._lock:
            if hold is not None and self._held.get(action_id) is hold:
                del self._held[action_id]

    @contextmanager
    def running(self, hold: Hold | None) -> Iterator[None]:
        """Around the effect of ``hold``'s action: not stale while it runs, nor for
        ``STALE_AFTER`` after it ended (its result is kept after it, and may fail to be)."""
        if hold is None:
            yield
            return
        with self._lock:
            hold.effects += 1
        try:
            yield
        finally:
            with self._lock:
                hold.effects -= 1
                hold.taken_at = self.clock()
