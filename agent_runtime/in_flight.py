"""Approved actions whose effect is running in this process: the store cannot tell a call cut
short by a crash (whose replay may run it again, under the same key) from the same call still
running here (a model that sent one tool-call id twice in a message, whose two calls a tool
node runs at once). One run's calls run in one process at a time (its thread lock)."""

from __future__ import annotations

import threading


class InFlight:
    def __init__(self) -> None:
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def take(self, action_id: str) -> bool:
        """Whether this caller may run the action's effect now: no other call in this process
        is running it."""
        with self._lock:
            if action_id in self._running:
                return False
            self._running.add(action_id)
            return True

    def release(self, action_id: str) -> None:
        with self._lock:
            self._running.discard(action_id)
