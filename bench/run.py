"""Run every benchmark and print the figures: ``python -m bench.run``.

Needs PostgreSQL (``BENCH_DATABASE_URL``, default postgresql://127.0.0.1:5432/test, a role that
may create databases). Prints tables; BENCHMARKS.md holds a copy with the machine they ran on.
"""

from __future__ import annotations

import os
import platform
import sys
import time

from bench import http_bench, store_bench


def main() -> int:
    started = time.perf_counter()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    )
    for section in (http_bench.run_all, store_bench.run_all):
        for block in section():
            print(block, flush=True)
    print(f"\nall benchmarks took {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
