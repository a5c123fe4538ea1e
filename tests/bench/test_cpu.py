"""The CPU meter reads what processes really spent, from /proc."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.cpu import Spent, cpu_seconds, durable_write_ms, metered

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_busy_process_is_charged_its_cpu_and_an_idle_one_nothing() -> None:
    busy = subprocess.Popen([sys.executable, "-c", BURN + "input()"], stdin=subprocess.PIPE)
    idle = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
    try:
        meter = metered({"busy": lambda: [busy.pid], "idle": lambda: [idle.pid]})
        with meter as spent:
            while cpu_seconds(busy.pid) < 0.4:  # it burns 0.4 s of CPU, then waits
                pass
        assert spent.seconds["busy"] >= 0.2
        assert spent.seconds["idle"] < 0.1
        assert spent.per(2) == pytest.approx(
            {
                "busy": spent.seconds["busy"] * 500,
                "idle": spent.seconds["idle"] * 500,
                "total": sum(spent.seconds.values()) * 500,
            }
        )
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
    assert cpu_seconds(busy.pid) == 0.0  # gone


def test_a_durable_write_costs_some_cpu(pg_url: str) -> None:
    assert 0 < durable_write_ms(pg_url, writes=300) < 50


def test_cpu_measured_over_separate_blocks_adds_up_by_part() -> None:
    total = Spent({"bot": 1.0})
    total.add(Spent({"bot": 0.5, "database": 0.25}))
    total.add(Spent({"database": 0.25}))
    assert total.seconds == {"bot": 1.5, "database": 0.5}
    assert total.per(1000) == {"bot": 1.5, "database": 0.5, "total": 2.0}
