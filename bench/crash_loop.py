"""The crash tests at every fault point, many times over, with the machine busy.

    .venv/bin/python -m bench.crash_loop --runs 20 [--pg-load 2] [--only inside_tool]

One busy process per core loads the CPU (a slow machine is where a lost checkpoint write or a
race shows up), and ``--pg-load`` adds that many PostgreSQL sessions running heavy queries.
Each run is a fresh pytest process (a fresh bot, sandbox and database). Prints "N of N passed"
per fault point and the end of each failure's output; exits non-zero if any run failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from bench.common import ADMIN_URL

ROOT = Path(__file__).resolve().parent.parent
CRASH_TESTS = "tests/bot/test_crash_recovery.py"
RUN_TIMEOUT = 900.0
PG_LOAD_QUERY = "SELECT sum(i) FROM generate_series(1, 3000000) AS i"


@dataclass
class Tally:
    passed: Counter[str] = field(default_factory=Counter)
    runs: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, int, str]] = field(default_factory=list)


def point_of(test_id: str) -> str:
    """``test_x[inside_tool]`` -> ``inside_tool``; an unparametrized test is named by itself."""
    name = test_id.rsplit("::", 1)[-1]
    return name[name.index("[") + 1 : -1] if name.endswith("]") else name


def collect(path: str) -> list[str]:
    found = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", path],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in found.stdout.splitlines() if "::" in line]


def _env() -> dict[str, str]:
    """Bots started by the tests inherit this: they run this checkout's code."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _spin() -> None:
    while True:
        pass


def _query_forever(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            conn.execute(PG_LOAD_QUERY)


@contextmanager
def load(*, cpu: int, pg: int) -> Iterator[None]:
    """Busy processes for the duration; stopped (each by its own handle) afterwards."""
    workers = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(cpu)]
    workers += [
        multiprocessing.Process(target=_query_forever, args=(ADMIN_URL,), daemon=True)
        for _ in range(pg)
    ]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(timeout=10)


def run_once(test_id: str) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", test_id],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return False, f"timed out after {RUN_TIMEOUT:.0f}s\n{out}"
    return done.returncode == 0, done.stdout + done.stderr


def loop(test_ids: Sequence[str], runs: int) -> Tally:
    """Round after round, every point once per round, so each sees the same conditions."""
    tally = Tally()
    for n in range(1, runs + 1):
        for test_id in test_ids:
            point = point_of(test_id)
            started = time.monotonic()
            ok, output = run_once(test_id)
            tally.runs[point] += 1
            tally.passed[point] += ok
            if not ok:
                tally.failures.append((point, n, output))
            verdict = "passed" if ok else "FAILED"
            print(f"run {n:>3} {point:<60} {verdict} ({time.monotonic() - started:.0f}s)")
            sys.stdout.flush()
    return tally


def report(tally: Tally, *, tail: int = 40) -> None:
    print("\nResults:")
    for point in tally.runs:
        print(f"  {point:<60} {tally.passed[point]} of {tally.runs[point]} passed")
    for point, n, output in tally.failures:
        lines = output.rstrip().splitlines()
        print(f"\n--- {point}, run {n}: last {tail} lines ---")
        print("\n".join(lines[-tail:]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per fault point")
    parser.add_argument("--cpu-load", type=int, default=os.cpu_count() or 1, help="busy processes")
    parser.add_argument("--pg-load", type=int, default=0, help="PostgreSQL sessions kept busy")
    parser.add_argument("--only", action="append", default=[], help="fault point(s) to run")
    args = parser.parse_args(argv)
    test_ids = [t for t in collect(CRASH_TESTS) if not args.only or point_of(t) in args.only]
    if not test_ids:
        parser.error("no crash test matches --only")
    print(
        f"{len(test_ids)} crash tests x {args.runs} runs; "
        f"CPU load {args.cpu_load} processes, PostgreSQL load {args.pg_load} sessions"
    )
    with load(cpu=args.cpu_load, pg=args.pg_load):
        tally = loop(test_ids, args.runs)
    report(tally)
    return 0 if not tally.failures else 1


if __name__ == "__main__":
    sys.exit(main())
