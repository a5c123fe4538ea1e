"""Run every benchmark and print the figures: ``python -m bench.run``.

Needs PostgreSQL (``BENCH_DATABASE_URL``, default postgresql://127.0.0.1:5432/test, a role that
may create databases). Prints tables, then the ratios against the floors (bench/ratios.py, fed
the store figures printed here); BENCHMARKS.md holds a copy with the machine they ran on.
"""

from __future__ import annotations

import os
import platform
import sys
import time

from bench import http_bench, ratios, store_bench


def main() -> int:
    started = time.perf_counter()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    )
    for block in http_bench.run_all():
        print(block, flush=True)
    store = store_bench.run_all()
    for block in store:
        print(block, flush=True)
    print(ratios.measure(store_blocks=store).render(), flush=True)
    print(f"\nall benchmarks took {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
