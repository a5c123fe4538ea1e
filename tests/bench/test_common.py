"""The benchmarks' databases: a run killed before it could drop its own leaves it behind; the
next run on the same host drops what dead runs left, and nothing a live run still uses."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from bench import common
from tests.migrated import drop_database


def _databases(admin_url: str) -> set[str]:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'approval_bench_%'")
        return {row[0] for row in rows}


def _create(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def test_a_new_run_drops_what_dead_runs_on_this_host_left(pg_admin_url, monkeypatch) -> None:
    monkeypatch.setattr(common, "ADMIN_URL", pg_admin_url)
    dead = common.bench_database_name(pid=_dead_pid())
    alive = common.bench_database_name()  # this process's: a run under way
    elsewhere = common.bench_database_name(pid=_dead_pid(), host="another-host")
    in_use = common.bench_database_name(pid=_dead_pid())  # someone is still connected
    names = (dead, alive, elsewhere, in_use)
    for name in names:
        _create(pg_admin_url, name)
    try:
        with (
            psycopg.connect(pg_admin_url.rpartition("/")[0] + "/" + in_use),
            common.fresh_database() as url,
        ):
            left = _databases(pg_admin_url)
            mine = url.rpartition("/")[2]
            assert mine in left
        assert dead not in left, "a dead run's database was left behind"
        assert {alive, elsewhere, in_use} <= left, "only this host's dead, unused ones go"
        assert mine not in _databases(pg_admin_url), "a run drops its own when it ends"
    finally:
        for name in names:
            drop_database(pg_admin_url, name)
