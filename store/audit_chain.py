"""The audit log is a chain: each event's hash covers its content and the previous hash.

With AUDIT_KEY the links are HMAC-SHA256, so someone with only database access cannot recompute
them; without it they are plain SHA-256, which shows accidents but not a careful rewrite. A
separately stored head (count, newest hash, keyed with AUDIT_KEY) anchors the end of the chain,
so removing the newest events, or all of them, shows too. ``verify`` names what does not hold.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from store.models import AuditEvent, AuditHead

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


class AuditChainError(Exception):
    """The audit log cannot be extended or checked as configured (missing, wrong or absent key,
    or an anchor that does not hold); the message says what to do."""


class AuditRollbackError(AuditChainError):
    """The stored head has fewer events than this process already saw committed: the head was
    restored from an older copy, hiding the newer events."""


UNSEALED = (
    "AUDIT_KEY is set but the log's head is not keyed: either the log was written before any "
    "key existed, or a keyed log was rewritten without the key; run `approval-bot audit verify`"
)


def _canonical(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    return value


def digest(prev_hash: str, event: AuditEvent, *, key: bytes | None = None) -> str:
    """The event's link: HMAC-SHA256 under ``key``, plain SHA-256 without one."""
    content = {name: _canonical(getattr(event, name)) for name in CHAIN_FIELDS}
    payload = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    message = (prev_hash + "\n" + payload).encode("utf-8")
    if key is None:
        return hashlib.sha256(message).hexdigest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def head_mac(head: AuditHead, key: bytes) -> str:
    """The head's MAC: without the key, no head can be forged to match a shortened log."""
    fields = (head.event_count, head.last_event_id, head.last_hash, head.keyed_from)
    message = "audit-head\n" + json.dumps(fields, separators=(",", ":"))
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def head_problem(head: AuditHead | None, key: bytes | None) -> str | None:
    """Why the head cannot be trusted with this key (None when it can)."""
    if head is None:
        return "the head that anchors the log is missing (its row was removed)"
    if key is None:
        if head.keyed_from is not None:
            return "the log is keyed: set AUDIT_KEY to the key it was written with"
        return None
    if head.keyed_from is None:
        if head.mac:
            return "the head carries a MAC but no key fields: a keyed log was rewritten"
        return UNSEALED
    if not hmac.compare_digest(head.mac.encode(), head_mac(head, key).encode()):
        return "the head does not match AUDIT_KEY: it was altered, or written with another key"
    return None


@dataclass(frozen=True)
class Expected:
    """A head fingerprint kept outside the database: the log had ``count`` events and its keyed
    head at that point had fingerprint ``fingerprint`` (``audit verify`` prints ``N:FP``)."""

    count: int
    fingerprint: str

    @classmethod
    def parse(cls, text: str) -> Expected:
        count, sep, fingerprint = text.strip().partition(":")
        if not sep or not count.isdigit() or not fingerprint:
            raise ValueError(f"expected N:FINGERPRINT as printed by `audit verify`, not {text!r}")
        return cls(int(count), fingerprint.lower())


@dataclass(frozen=True)
class ChainReport:
    """``consistent``: nothing found wrong. ``intact``: consistent and keyed, so nobody without
    the key could have rewritten it. ``unsealed``: AUDIT_KEY is set but the log is not keyed
    (never keyed, or rewritten without the key). ``sealed`` events were written before the key.
    ``fingerprint`` (``N:FP``) identifies the keyed head: kept elsewhere and given back with
    ``--expect``, it shows a later rollback of the log and its head to an earlier state, which
    nothing inside the database can."""

    checked: int
    problem: str | None = None
    keyed: bool = False
    unsealed: bool = False
    sealed: int = 0
    fingerprint: str = ""
    last_hash: str = ""

    @property
    def consistent(self) -> bool:
        return self.problem is None

    @property
    def intact(self) -> bool:
        return self.consistent and self.keyed


def fingerprint(
    *, count: int, last_id: int | None, last_hash: str, keyed_from: int, key: bytes
) -> str:
    """The keyed head's fingerprint when the log had ``count`` events (a prefix of its MAC)."""
    head = AuditHead(
        event_count=count, last_event_id=last_id, last_hash=last_hash, keyed_from=keyed_from
    )
    return head_mac(head, key)[:16]


@dataclass
class _Walk:
    count: int = 0
    last_id: int | None = None
    last_hash: str = ""
    problem: str | None = None
    marks: dict[int, str] = field(default_factory=dict)


def _walk(
    events: Iterable[AuditEvent], head: AuditHead, key: bytes | None, *, mark_at: int | None = None
) -> _Walk:
    walk = _Walk()
    rows = iter(events)
    while True:
        if walk.count == mark_at and key is not None and head.keyed_from is not None:
            walk.marks[walk.count] = fingerprint(
                count=walk.count,
                last_id=walk.last_id,
                last_hash=walk.last_hash,
                keyed_from=head.keyed_from,
                key=key,
            )
        position = walk.count + 1
        try:
            event = next(rows)
        except StopIteration:
            return walk
        except ValueError:  # e.g. a value SQLite stores as text, rewritten into garbage
            walk.problem = f"an event from #{position} on cannot be read: a value was mangled"
            return walk
        keyed = head.keyed_from is not None and position >= head.keyed_from
        where = f"event {event.id} (#{position})"
        if event.prev_hash != walk.last_hash:
            walk.problem = (
                f"{where}: its link to the previous event does not match "
                "(an event before it was removed, inserted or altered)"
            )
            return walk
        if event.hash != digest(walk.last_hash, event, key=key if keyed else None):
            kind = "MAC" if keyed else "hash"
            walk.problem = f"{where} was altered: its content does not match its {kind}"
            return walk
        walk.count, walk.last_id, walk.last_hash = position, event.id, event.hash


def _tail_problem(walk: _Walk, head: AuditHead) -> str | None:
    recorded = f"the head records {head.event_count} events ending at event {head.last_event_id}"
    if walk.count < head.event_count:
        if walk.count == 0:
            return f"the log is empty but {recorded}: it was emptied"
        missing = head.event_count - walk.count
        return (
            f"the newest {missing} event(s) are missing: {recorded}, "
            f"the log ends at event {walk.last_id} (#{walk.count})"
        )
    if walk.count > head.event_count:
        extra = walk.count - head.event_count
        return f"{extra} event(s) were added behind the head: {recorded}"
    if walk.last_hash != head.last_hash or walk.last_id != head.last_event_id:
        return f"the newest event, {walk.last_id}, does not match the head: {recorded}"
    return None


def _expect_problem(walk: _Walk, expect: Expected, *, keyed: bool) -> str | None:
    if not keyed:
        return "--expect needs a keyed log and its AUDIT_KEY"
    if walk.count < expect.count:
        return (
            f"the log has {walk.count} events but had at least {expect.count} when "
            f"{expect.count}:{expect.fingerprint} was printed: newer events were removed"
        )
    found = walk.marks.get(expect.count, "")
    if not hmac.compare_digest(found.encode(), expect.fingerprint.encode()):
        return (
            f"at event #{expect.count} the head's fingerprint is {expect.count}:{found}, not "
            f"{expect.count}:{expect.fingerprint}: the log up to there is not the one you kept"
        )
    return None


def verify(
    events: Iterable[AuditEvent],
    *,
    head: AuditHead | None,
    key: bytes | None,
    expect: Expected | None = None,
) -> ChainReport:
    """Check the head, walk the log in id order, then check that it ends where the head says
    (and, given ``expect``, that it still holds what it held when that fingerprint was kept)."""
    problem = head_problem(head, key)
    unsealed = problem == UNSEALED
    if (problem is not None and not unsealed) or head is None:
        return ChainReport(0, problem)
    mark_at = expect.count if expect is not None else None
    walk = _walk(events, head, key, mark_at=mark_at)
    keyed = key is not None and head.keyed_from is not None
    problem = walk.problem or _tail_problem(walk, head)
    if problem is None and expect is not None:
        problem = _expect_problem(walk, expect, keyed=keyed)
    sealed = (head.keyed_from - 1) if head.keyed_from is not None else 0
    mark = ""
    if keyed and key is not None and head.keyed_from is not None:
        mark = f"{head.event_count}:{head_mac(head, key)[:16]}"
    return ChainReport(
        walk.count,
        problem,
        keyed=keyed,
        unsealed=unsealed,
        sealed=sealed,
        fingerprint=mark,
        last_hash=walk.last_hash,
    )
