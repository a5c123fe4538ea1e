"""Where the machine's CPU goes while approvals are worked: the bot's processes, the database's
backends, the benchmark's own process (the Slack double and the client, or plain LangGraph).

Read from ``/proc`` (Linux), so the throughput ratio can be set against what the cores allow:
a rate can never exceed ``cores / CPU seconds per approval``, however the work is scheduled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")
Pids = Callable[[], list[int]]


def cpu_seconds(pid: int) -> float:
    """User plus system time of a process, all its threads; 0 for one that is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # Fields after the command name, which may hold spaces, in parentheses.
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def database_backends(url: str) -> Pids:
    """The server processes serving connections to ``url``'s database, as they are now."""
    name = url.rpartition("/")[2]

    def pids() -> list[int]:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            ).fetchall()
        return [int(row[0]) for row in rows]

    return pids


@dataclass
class Spent:
    """CPU seconds by part, filled in when the measured block ends."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, more: Spent) -> None:
        """Count ``more`` in too (a figure measured over several separate blocks)."""
        for part, seconds in more.seconds.items():
            self.seconds[part] = self.seconds.get(part, 0.0) + seconds

    def per(self, items: int) -> dict[str, float]:
        """Milliseconds per item, by part, with their total."""
        spent = {part: s * 1000 / items for part, s in self.seconds.items()}
        return {**spent, "total": sum(spent.values())}


class metered:
    """CPU each part's processes used during the ``with`` block (``spent`` is filled in when it
    ends). A process that starts during it counts from zero; one that ends during it is not
    counted (its last reading is lost with it)."""

    def __init__(self, parts: dict[str, Pids]) -> None:
        self.parts = parts
        self.spent = Spent()
        self.before: dict[str, dict[int, float]] = {}

    def __enter__(self) -> Spent:
        self.before = {
            part: {p: cpu_seconds(p) for p in pids()} for part, pids in self.parts.items()
        }
        return self.spent

    def __exit__(self, *exc: object) -> None:
        for part, pids in self.parts.items():
            before = self.before[part]
            now = {pid: cpu_seconds(pid) for pid in {*pids(), *before}}
            self.spent.seconds[part] = sum(
                max(0.0, now[pid] - before.get(pid, 0.0)) for pid in now if now[pid] > 0
            )


def durable_write_ms(url: str, *, writes: int = 200) -> float:
    """CPU, client and server together, of the least durable record: one small row inserted
    and committed, on a connection of its own (no ORM, no pool)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE least_write (id serial PRIMARY KEY, note text)")
        backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        with metered({"both": lambda: [os.getpid(), backend]}) as spent:
            for n in range(writes):
                with conn.transaction():
                    conn.execute("INSERT INTO least_write (note) VALUES (%s)", (f"decision {n}",))
    return spent.per(writes)["both"]
