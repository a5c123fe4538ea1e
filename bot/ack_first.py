"""Acks before decision work, inside one process.

Slack wants every request answered within 3 seconds; the decision work behind a click does
not have to start in the same millisecond. ``serve`` answers Slack and works on stored clicks
in one interpreter, so on a burst of clicks the inbox workers' work would slow every ack. The
HTTP front end and the Socket Mode handler count the requests being answered; an inbox worker
about to start an item waits while more than one is (a lone request is usually the very click
that handed the item over), for at most ``patience`` seconds (renewing the item's lease
meanwhile), so a steady stream of requests never starves it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

ALONE = 1
"""Requests being answered that do not make a worker wait."""


class AckFirst:
    def __init__(self, *, patience: float = 0.5) -> None:
        self.patience = patience
        self._answering = 0
        self._waiting = 0
        self._quiet = threading.Condition()

    @property
    def waiting(self) -> int:
        """Workers waiting for their turn now (for tests and monitoring)."""
        with self._quiet:
            return self._waiting

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Around the answer to one Slack request."""
        with self._quiet:
            self._answering += 1
        try:
            yield
        finally:
            with self._quiet:
                self._answering -= 1
                if self._answering <= ALONE:
                    self._quiet.notify_all()

    def wait_turn(self) -> bool:
        """Before an item's work: wait while a burst is being answered, at most ``patience``
        seconds; ``True`` if it waited at all."""
        with self._quiet:
            if self.patience <= 0 or self._answering <= ALONE:
                return False
            self._waiting += 1
            try:
                self._quiet.wait_for(lambda: self._answering <= ALONE, timeout=self.patience)
            finally:
                self._waiting -= 1
            return True
