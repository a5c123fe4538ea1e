"""The audit log is a hash chain: each event's hash covers its content and the previous hash.

Changing, deleting or inserting a stored event breaks the chain from that event on, and
``verify`` names the first event where it breaks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from store.models import AuditEvent

CHAIN_FIELDS = (
    "created_at",
    "kind",
    "outcome",
    "actor_id",
    "team_id",
    "run_id",
    "request_id",
    "action_id",
    "reason",
    "detail",
)


def _canonical(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    return value


def digest(prev_hash: str, event: AuditEvent) -> str:
    content = {name: _canonical(getattr(event, name)) for name in CHAIN_FIELDS}
    payload = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + "\n" + payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    checked: int
    broken_at: int | None = None
    reason: str | None = None

    @property
    def intact(self) -> bool:
        return self.broken_at is None


def verify(events: Iterable[AuditEvent]) -> ChainReport:
    """Walk the log in id order; report the first event whose link or content does not hold."""
    prev = ""
    checked = 0
    for event in events:
        if event.prev_hash != prev:
            return ChainReport(checked, event.id, "its link to the previous event does not match")
        if event.hash != digest(prev, event):
            return ChainReport(checked, event.id, "its content does not match its hash")
        prev = event.hash
        checked += 1
    return ChainReport(checked)
