"""Shared pieces of the benchmarks: fresh PostgreSQL databases, timing, percentiles, tables."""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")
ADMIN_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/test")


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    name = f"approval_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield ADMIN_URL.rpartition("/")[0] + "/" + name
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def concurrently(jobs: Sequence[Callable[[], T]]) -> list[tuple[float, T]]:
    """Start all jobs at once (a barrier); return (seconds, result) for each."""
    barrier = threading.Barrier(len(jobs))

    def timed(job: Callable[[], T]) -> tuple[float, T]:
        barrier.wait()
        start = time.perf_counter()
        result = job()
        return time.perf_counter() - start, result

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(timed, jobs))


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        f"\n{title}",
        "| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)) + " |",
    ]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
        for r in cells[1:]
    ]
    return "\n".join(lines)
