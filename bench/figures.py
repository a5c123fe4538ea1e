"""The figures ``bench.ratios`` prints: each a ratio of the bot to its floor against a goal,
and the pending list's latency read from ``bench.store_bench``'s table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from bench import store_bench
from bench.common import table

LISTING_GOAL_MS = 20.0


@dataclass
class Measured:
    """What one bot process and then its floors did, in seconds and approvals per second."""

    acks: list[list[float]]  # one list per burst
    rates: list[float]  # one per burst
    to_result: list[float]
    rss_mib: float
    peak_mib: float
    floor_acks: list[list[float]] = dataclasses.field(default_factory=list)
    floor_rates: list[float] = dataclasses.field(default_factory=list)
    floor_resumes: list[float] = dataclasses.field(default_factory=list)
    durable_resumes: list[float] = dataclasses.field(default_factory=list)  # the durable floor
    floor_rss_mib: float = 0.0
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)  # ms per approval, by part
    floor_cpu: dict[str, float] = dataclasses.field(default_factory=dict)  # ms per plain resume
    bolt_cpu_ms: float = 0.0  # the bare Bolt app's CPU per click
    write_cpu_ms: float = 0.0  # one durable row written and committed


@dataclass(frozen=True)
class Ratio:
    figure: str
    floor: float
    bot: float
    goal: float  # the ratio bot / floor must stay at or below it (or at or above it)
    at_least: bool = False

    @property
    def ratio(self) -> float:
        return self.bot / self.floor

    @property
    def met(self) -> bool:
        return self.ratio >= self.goal if self.at_least else self.ratio <= self.goal

    def row(self) -> tuple[str, ...]:
        goal = f"{'>=' if self.at_least else '<='} {self.goal:g}x"
        return (
            self.figure,
            f"{self.floor:.1f}",
            f"{self.bot:.1f}",
            f"{self.ratio:.2f}",
            goal,
            "yes" if self.met else "no",
        )


@dataclass
class Report:
    ratios: list[Ratio]
    notes: list[str]

    def render(self) -> str:
        header = ["figure", "floor", "bot", "ratio", "goal", "met"]
        title = "The bot against its floor (same machine, same run, same client)"
        return "\n".join([table(title, header, [r.row() for r in self.ratios]), *self.notes])


def listing_figure(blocks: Sequence[str]) -> tuple[float, str]:
    """The pending-list latency from store_bench's table: its p95 column when it has one,
    else its single figure (a median), named so the reader knows which."""
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        if not lines:
            continue
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
        for cells in rows:  # a row of its own for the p95 comes first
            if "pending" in cells[0].lower() and "p95" in cells[0].lower():
                return float(cells[1]), "p95"
        for cells in rows:
            if "pending" not in cells[0].lower():
                continue
            p95 = [i for i, h in enumerate(header) if "p95" in h.lower()]
            if p95:
                return float(cells[p95[0]]), "p95"
            median = [i for i, h in enumerate(header) if "ms" in h.lower().split()]
            if median:
                return float(cells[median[0]]), "median"
    raise ValueError("store_bench printed no pending-list row")


@contextmanager
def store_scale(scale: tuple[int, int, int] | None) -> Iterator[None]:
    """store_bench at another scale for smoke runs; its own scale when None."""
    names = ("REQUESTS", "PENDING", "AUDIT")
    saved = [getattr(store_bench, name) for name in names]
    if scale is not None:
        for name, value in zip(names, scale, strict=True):
            setattr(store_bench, name, value)
    try:
        yield
    finally:
        for name, value in zip(names, saved, strict=True):
            setattr(store_bench, name, value)


def pending_list(scale: tuple[int, int, int] | None, blocks: Sequence[str] | None) -> Ratio:
    """store_bench's pending-list figure against the 20 ms goal (the floor column holds the
    goal, so the ratio must stay at or below 1)."""
    with store_scale(scale):
        requests, audit = store_bench.REQUESTS, store_bench.AUDIT
        figure, kind = listing_figure(blocks if blocks is not None else store_bench.run_all())
    return Ratio(
        f"pending list {kind} ms, {requests:,} requests / {audit:,} audit events "
        f"(floor = {LISTING_GOAL_MS:g} ms goal)",
        LISTING_GOAL_MS,
        figure,
        1,
    )
