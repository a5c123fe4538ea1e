"""Shared pieces of the benchmarks: fresh PostgreSQL databases, timing, percentiles, tables."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")
ADMIN_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/test")


_PREFIX = "approval_bench_"


def _host_tag(host: str | None = None) -> str:
    return hashlib.sha256((host or socket.gethostname()).encode()).hexdigest()[:8]


def bench_database_name(*, pid: int | None = None, host: str | None = None) -> str:
    """A run's database, named after the host and process that made it: a run killed before
    it could drop it (``kill -9``, a closed terminal) is known by its dead process."""
    return f"{_PREFIX}{_host_tag(host)}_{pid or os.getpid()}_{uuid.uuid4().hex[:10]}"


def _left_by_dead_runs(names: Iterable[str]) -> list[str]:
    """Databases this host's runs made whose process is gone; another host's are not ours
    to judge."""
    dead = []
    for name in names:
        host, _, rest = name.removeprefix(_PREFIX).partition("_")
        pid = rest.partition("_")[0]
        if host != _host_tag() or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            dead.append(name)
        except PermissionError:
            continue  # alive, another user's
    return dead


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A new database for one measurement, dropped after it, and first any that killed runs
    on this host left behind (each holds a whole store: they add up)."""
    name = bench_database_name()
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        found = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (_PREFIX + "%",)
        )
        for left in _left_by_dead_runs(row[0] for row in found.fetchall()):
            conn.execute(f'DROP DATABASE IF EXISTS "{left}" WITH (FORCE)')
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
