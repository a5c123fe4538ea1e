"""Shared pieces of the benchmarks: fresh PostgreSQL databases, timing, percentiles, tables."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")
ADMIN_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/test")


_PREFIX = "approval_bench_"
logger = logging.getLogger(__name__)


def _read(path: str, *, link: bool = False) -> str:
    try:
        return os.readlink(path) if link else Path(path).read_text().strip()
    except OSError:
        return ""


def _host_tag(host: str | None = None) -> str:
    """This host, this boot and this process namespace: a pid means a process only there
    (two containers may share a host name and a database server, not their pids)."""
    seen_from = [
        host or socket.gethostname(),
        _read("/proc/sys/kernel/random/boot_id"),
        _read("/proc/self/ns/pid", link=True),
    ]
    return hashlib.sha256("|".join(seen_from).encode()).hexdigest()[:8]


def bench_database_name(*, pid: int | None = None, host: str | None = None) -> str:
    """A run's database, named after where and by which process it was made: a run killed
    before it could drop it (``kill -9``, a closed terminal) is known by its dead process."""
    return f"{_PREFIX}{_host_tag(host)}_{pid or os.getpid()}_{uuid.uuid4().hex[:10]}"


def _dead(name: str, *, here: str) -> bool:
    """Made here (``here``: this host's tag) by a process that is gone; another host's, or
    a name of another form, is not ours to judge."""
    tag, _, rest = name.removeprefix(_PREFIX).partition("_")
    pid = rest.partition("_")[0]
    if tag != here or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # alive (another user's), or no pid at all
    return False


def _drop_left_behind(conn: psycopg.Connection[Any]) -> None:
    """Drop what killed runs left (each a whole store: they add up), never one in use."""
    idle = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname NOT IN "
        "(SELECT datname FROM pg_stat_activity WHERE datname IS NOT NULL)",
        (_PREFIX + "%",),
    ).fetchall()
    here = _host_tag()
    for (name,) in idle:
        if not _dead(name, here=here):
            continue
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')  # fails if anyone connected since
        except psycopg.Error as exc:
            logger.warning("left %s in place: %s", name, exc)


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A new database for one measurement, dropped after it; first, those that killed runs
    here left behind."""
    name = bench_database_name()
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        _drop_left_behind(conn)
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
