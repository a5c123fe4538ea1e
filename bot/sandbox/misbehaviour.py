"""Ways a Slack Web API call goes wrong, injected into the sandbox one call at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HOLD_LIMIT = 120.0
"""A held call goes on by itself after this many seconds, so a failed test cannot hang."""


class Dropped(Exception):
    """Close the connection without answering (the caller sees it dropped, as on a timeout)."""


def _any(_args: dict[str, Any]) -> bool:
    return True


@dataclass
class Misbehaviour:
    """The next call of ``method`` that ``match`` accepts goes wrong, once.

    ``error``: answered with this error; the call takes no effect unless ``takes_effect``.
    ``drop``: takes effect, then the connection closes with no answer.
    ``hold``: the answer waits until ``release`` is set (after the effect, if any).
    ``late``: the effect, and the answer, wait until ``release`` is set: calls made meanwhile
    take effect first, as when Slack applies two updates out of order.
    ``reached`` is set when the call arrives.
    """

    method: str
    match: Callable[[dict[str, Any]], bool] = _any
    error: str | None = None
    takes_effect: bool = False
    drop: bool = False
    hold: bool = False
    late: bool = False
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def effect_happens(self) -> bool:
        return self.error is None or self.takes_effect


class Misbehaviours:
    def __init__(self) -> None:
        self._pending: list[Misbehaviour] = []
        self._added: list[Misbehaviour] = []
        self._lock = threading.Lock()

    def add(self, misbehaviour: Misbehaviour) -> Misbehaviour:
        with self._lock:
            self._pending.append(misbehaviour)
            self._added.append(misbehaviour)
        return misbehaviour

    def take(self, method: str, args: dict[str, Any]) -> Misbehaviour | None:
        with self._lock:
            for item in self._pending:
                if item.method == method and item.match(args):
                    self._pending.remove(item)
                    item.reached.set()
                    return item
        return None

    def release_all(self) -> None:
        """Let every held call go on (on shutdown)."""
        with self._lock:
            for item in self._added:
                item.release.set()
