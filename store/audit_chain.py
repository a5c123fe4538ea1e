"""The audit log is a few chains (shards): each event's hash covers its content and the
previous hash in its chain.

With AUDIT_KEY the links are HMAC-SHA256, so someone with only database access cannot recompute
them; without it they are plain SHA-256, which shows accidents but not a careful rewrite. A
separately stored head per chain (count, newest hash, keyed with AUDIT_KEY) anchors its end, so
removing the newest events, or all of them, shows too. ``audit_verify`` walks the chains.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.audit_models import AUDIT_SHARDS, AuditEvent, AuditHead

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
    """The head's MAC: without the key, no head can be forged to match a shortened log. It
    names its shard, so heads cannot be swapped; shard 0 keeps the form a single-chain log's
    head had, so such a log's keyed head still holds after it became shard 0."""
    fields = (head.event_count, head.last_event_id, head.last_hash, head.keyed_from)
    shard = head.id or 0
    if shard == 0:
        message = "audit-head\n" + json.dumps(fields, separators=(",", ":"))
    else:
        message = "audit-head-shard\n" + json.dumps([shard, *fields], separators=(",", ":"))
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def in_shard(shard: int, problem: str) -> str:
    """A problem found in one chain, naming the chain unless it is shard 0 (where a log written
    as a single chain lives)."""
    return problem if shard == 0 else f"shard {shard}: {problem}"


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
    """A fingerprint kept outside the database: the log had ``count`` events, ``counts[k]`` of
    them in shard k, and its keyed heads at that point had fingerprint ``fingerprint``
    (``audit verify`` prints ``N:FP``, with ``:c0,c1,...`` once shards other than 0 are used)."""

    count: int
    fingerprint: str
    counts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Expected:
        count, sep, rest = text.strip().partition(":")
        fingerprint, _, spread = rest.partition(":")
        if not sep or not count.isdigit() or not fingerprint:
            raise ValueError(f"expected N:FINGERPRINT as printed by `audit verify`, not {text!r}")
        counts = (int(count),) + (0,) * (AUDIT_SHARDS - 1)
        if spread:
            parts = spread.split(",")
            if len(parts) != AUDIT_SHARDS or not all(p.isdigit() for p in parts):
                raise ValueError(f"expected {AUDIT_SHARDS} counts after the fingerprint: {text!r}")
            counts = tuple(int(p) for p in parts)
            if sum(counts) != int(count):
                raise ValueError(f"the shard counts do not add up to {count}: {text!r}")
        return cls(int(count), fingerprint.lower(), counts)

    @property
    def token(self) -> str:
        """As ``audit verify`` printed it."""
        if all(count == 0 for count in self.counts[1:]):
            return f"{self.count}:{self.fingerprint}"
        return f"{self.count}:{self.fingerprint}:{','.join(map(str, self.counts))}"


@dataclass(frozen=True)
class ChainReport:
    """``consistent``: nothing found wrong. ``intact``: consistent and keyed, so nobody without
    the key could have rewritten it. ``unsealed``: AUDIT_KEY is set but the log is not keyed
    (never keyed, or rewritten without the key). ``sealed`` events were written before the key.
    ``fingerprint`` (``N:FP``) identifies the keyed heads: kept elsewhere and given back with
    ``--expect``, it shows a later rollback of the log and its heads to an earlier state, which
    nothing inside the database can. ``last_hash`` identifies an unkeyed log for sealing."""

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


def _single_chain(heads: Sequence[AuditHead]) -> bool:
    return all(head.event_count == 0 for head in heads if (head.id or 0) != 0)


def combined_last_hash(heads: Sequence[AuditHead]) -> str:
    """One value for the state of every chain (what ``audit seal`` is given): while only
    shard 0 holds events, its newest hash, as a single-chain log printed it."""
    if _single_chain(heads):
        return next((h.last_hash for h in heads if (h.id or 0) == 0), "")
    states = [[h.id, h.event_count, h.last_hash] for h in heads]
    payload = "audit-heads\n" + json.dumps(states, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def fingerprint(heads: Sequence[AuditHead], key: bytes) -> str:
    """The keyed heads' fingerprint, ``N:FP`` (``N:FP:c0,c1,...`` once shards other than 0
    hold events): a prefix of a MAC over every head, shard 0's own MAC while only it is used."""
    total = sum(head.event_count for head in heads)
    if _single_chain(heads):
        zero = next(h for h in heads if (h.id or 0) == 0)
        return f"{total}:{head_mac(zero, key)[:16]}"
    states = [
        [h.id, h.event_count, h.last_event_id, h.last_hash, h.keyed_from]
        for h in sorted(heads, key=lambda h: h.id or 0)
    ]
    message = "audit-heads\n" + json.dumps(states, separators=(",", ":"))
    mac = hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
    counts = ",".join(str(h.event_count) for h in sorted(heads, key=lambda h: h.id or 0))
    return f"{total}:{mac}:{counts}"
