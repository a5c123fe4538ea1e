"""The approver roles of recent actions, remembered by the process that read or recorded them.

An action's roles are fixed when it is recorded. A decision must look up user groups before its
transaction opens (never inside it), and for that it needs the roles; remembering them spares
the decision a transaction of its own just to read them."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

REMEMBERED = 4096
"""Actions remembered at most; the oldest are forgotten first (and read again if decided)."""


class ActionRoles:
    def __init__(self, *, size: int = REMEMBERED) -> None:
        self.size = size
        self._roles: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, action_id: str, roles: Iterable[str]) -> None:
        with self._lock:
            self._roles[action_id] = tuple(roles)
            self._roles.move_to_end(action_id)
            while len(self._roles) > self.size:
                self._roles.popitem(last=False)

    def get(self, action_id: str) -> tuple[str, ...] | None:
        with self._lock:
            return self._roles.get(action_id)
