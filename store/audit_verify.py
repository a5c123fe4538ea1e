"""Checking the audit log: every shard's head, then every chain walked in id order, then each
chain's end against its head and, given one, a fingerprint kept outside the database."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from store.audit_chain import (
    UNSEALED,
    ChainReport,
    Expected,
    combined_last_hash,
    digest,
    fingerprint,
    head_problem,
    in_shard,
)
from store.audit_models import AUDIT_SHARDS, AuditEvent, AuditHead


@dataclass
class _Walk:
    count: int = 0
    last_id: int | None = None
    last_hash: str = ""


@dataclass
class _Walks:
    chains: dict[int, _Walk]
    marks: dict[int, _Walk]
    problem: str | None = None


def _as_heads(chains: Mapping[int, _Walk], heads: Mapping[int, AuditHead]) -> list[AuditHead]:
    """Heads as the walked chains (or their marks) would have them."""
    return [
        AuditHead(
            id=shard,
            event_count=walk.count,
            last_event_id=walk.last_id,
            last_hash=walk.last_hash,
            keyed_from=heads[shard].keyed_from,
        )
        for shard, walk in sorted(chains.items())
    ]


def heads_problem(heads: Mapping[int, AuditHead], key: bytes | None) -> tuple[str | None, bool]:
    """What is wrong with the heads for this key, and whether the log is merely unsealed. The
    heads are keyed together (at creation or by ``audit seal``): a mix means a rewrite."""
    unsealed = False
    for shard in range(AUDIT_SHARDS):
        problem = head_problem(heads.get(shard), key)
        if problem == UNSEALED:
            unsealed = True
        elif problem is not None:
            return in_shard(shard, problem), False
    unkeyed = [shard for shard in range(AUDIT_SHARDS) if heads[shard].keyed_from is None]
    if unsealed and len(unkeyed) < AUDIT_SHARDS:
        problem = "the head is not keyed but other shards' heads are: a keyed log was rewritten"
        return in_shard(unkeyed[0], problem), False
    return None, unsealed


def _link_problem(walk: _Walk, event: AuditEvent, head: AuditHead, key: bytes | None) -> str | None:
    position = walk.count + 1
    keyed = head.keyed_from is not None and position >= head.keyed_from
    where = f"event {event.id} (#{position})"
    if event.prev_hash != walk.last_hash:
        return (
            f"{where}: its link to the previous event does not match "
            "(an event before it was removed, inserted or altered)"
        )
    if event.hash != digest(walk.last_hash, event, key=key if keyed else None):
        return f"{where} was altered: its content does not match its {'MAC' if keyed else 'hash'}"
    return None


def _walk(
    events: Iterable[AuditEvent],
    heads: Mapping[int, AuditHead],
    key: bytes | None,
    *,
    mark_at: Sequence[int] | None,
) -> _Walks:
    """Each event extends its own shard's chain; ``mark_at[k]`` notes chain k's state then."""
    walks = _Walks({shard: _Walk() for shard in range(AUDIT_SHARDS)}, {})
    if mark_at is not None:
        walks.marks = {shard: _Walk() for shard, count in enumerate(mark_at) if count == 0}
    rows, seen = iter(events), 0
    while True:
        try:
            event = next(rows)
        except StopIteration:
            return walks
        except ValueError:  # e.g. a value SQLite stores as text, rewritten into garbage
            walks.problem = f"an event from #{seen + 1} on cannot be read: a value was mangled"
            return walks
        seen += 1
        walk = walks.chains.get(event.shard)
        if walk is None:
            walks.problem = f"event {event.id} is in shard {event.shard}, which the log lacks"
            return walks
        walks.problem = _link_problem(walk, event, heads[event.shard], key)
        if walks.problem is not None:
            walks.problem = in_shard(event.shard, walks.problem)
            return walks
        walk.count, walk.last_id, walk.last_hash = walk.count + 1, event.id, event.hash
        if mark_at is not None and walk.count == mark_at[event.shard]:
            walks.marks[event.shard] = replace(walk)


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


def _tails_problem(walks: _Walks, heads: Mapping[int, AuditHead]) -> str | None:
    for shard, walk in sorted(walks.chains.items()):
        problem = _tail_problem(walk, heads[shard])
        if problem is not None:
            return in_shard(shard, problem)
    return None


def _expect_problem(
    walks: _Walks, heads: Mapping[int, AuditHead], expect: Expected, *, key: bytes | None
) -> str | None:
    if key is None:
        return "--expect needs a keyed log and its AUDIT_KEY"
    total = sum(walk.count for walk in walks.chains.values())
    kept = expect.token
    if total < expect.count:
        return (
            f"the log has {total} events but had at least {expect.count} when "
            f"{kept} was printed: newer events were removed"
        )
    for shard, count in enumerate(expect.counts):
        if walks.chains[shard].count < count:
            return in_shard(
                shard,
                f"the chain has {walks.chains[shard].count} events but had {count} when "
                f"{kept} was printed: newer events were removed",
            )
    found = fingerprint(_as_heads(walks.marks, heads), key)
    if not hmac.compare_digest(found.split(":")[1].encode(), expect.fingerprint.encode()):
        return (
            f"at event #{expect.count} the heads' fingerprint is {found}, not {kept}: "
            "the log up to there is not the one you kept"
        )
    return None


def verify(
    events: Iterable[AuditEvent],
    *,
    heads: Sequence[AuditHead],
    key: bytes | None,
    expect: Expected | None = None,
) -> ChainReport:
    """Check the heads, walk the log in id order, then check that each chain ends where its
    head says (and, given ``expect``, that it still holds what it held when that was kept)."""
    by_shard = {head.id: head for head in heads}
    problem, unsealed = heads_problem(by_shard, key)
    if problem is not None:
        return ChainReport(0, problem)
    walks = _walk(events, by_shard, key, mark_at=expect.counts if expect is not None else None)
    keyed = key is not None and all(head.keyed_from is not None for head in heads)
    problem = walks.problem or _tails_problem(walks, by_shard)
    if problem is None and expect is not None:
        problem = _expect_problem(walks, by_shard, expect, key=key if keyed else None)
    ordered = [by_shard[shard] for shard in range(AUDIT_SHARDS)]
    return ChainReport(
        sum(walk.count for walk in walks.chains.values()),
        problem,
        keyed=keyed,
        unsealed=unsealed,
        sealed=sum(h.keyed_from - 1 for h in ordered if h.keyed_from is not None),
        fingerprint=fingerprint(ordered, key) if keyed and key is not None else "",
        last_hash=combined_last_hash(_as_heads(walks.chains, by_shard)),
    )
