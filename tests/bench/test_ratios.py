"""The ratios run end to end at a tiny scale: four figures, each with a number for the bot, its
floor and their ratio, and the bot's memory."""

from __future__ import annotations

import itertools
import re
import statistics

import pytest

from bench import common, figures, ratios

FIGURES = ("ack p99 ms", "approvals/s", "click -> result ms", "pending list")


def _rows(text: str, title: str = "The bot against its floor") -> list[list[str]]:
    """The rows of the table under the line that starts with ``title`` (header left out)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title)) + 1
    block = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in block[2:]]


def test_quick_run_prints_the_four_ratios_with_numbers(
    pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "ADMIN_URL", pg_admin_url)
    text = ratios.measure(ratios.QUICK).render()

    rows = _rows(text)
    assert [next(f for f in FIGURES if row[0].startswith(f)) for row in rows] == list(FIGURES)
    for figure, floor, bot, ratio, goal, met in rows:
        assert float(floor) > 0 and float(bot) > 0, figure
        assert float(ratio) == pytest.approx(float(bot) / float(floor), rel=0.1, abs=0.01)
        assert re.fullmatch(r"(<=|>=) [\d.]+x", goal) and met in ("yes", "no"), figure
    assert re.search(r"RSS of `approval-bot serve` after 13 approvals: \d+ MiB", text)
    each = re.search(
        r"Each burst: ack p99 ms bot (.+), bare Bolt (.+); approvals/s bot (.+), plain (.+)", text
    )
    assert each is not None
    bursts = [[float(v) for v in group.split(", ")] for group in each.groups()]
    assert [len(values) for values in bursts] == [2, 2, 2, 2]
    ack, rate = rows[0], rows[1]
    assert float(ack[2]) == pytest.approx(statistics.median(bursts[0]), abs=1)
    assert float(ack[1]) == pytest.approx(statistics.median(bursts[1]), abs=1)
    assert float(rate[2]) == pytest.approx(statistics.median(bursts[2]), abs=0.15)
    assert float(rate[1]) == pytest.approx(statistics.median(bursts[3]), abs=0.15)
    cpu = {row[0]: row[1:] for row in _rows(text, "CPU ms per approval")}
    parts = ["approval-bot", "benchmark process", "PostgreSQL backends"]
    assert list(cpu)[:4] == [*parts, "total"]
    for column in (0, 1):
        total = sum(float(cpu[p][column]) for p in parts)
        assert float(cpu["total"][column]) == pytest.approx(total, abs=0.2)
    assert float(cpu["total"][0]) > 0 and float(cpu["total"][1]) > 0
    assert re.search(r"the bare Bolt app's CPU per click: [\d.]+ ms; one small row", text)
    to_result = _rows(text, "Click -> result, median of 3")
    assert [row[0].split()[0] for row in to_result] == ["plain", "durable", "the"]
    plain, durable, bot = (float(row[1]) for row in to_result)
    assert plain > 0 and durable > 0 and bot > 0
    assert to_result[0][2] == "1.00" and float(to_result[1][2]) == pytest.approx(
        durable / plain, abs=0.01
    )
    figure = next(row for row in rows if row[0].startswith("click -> result"))
    assert (float(figure[1]), float(figure[2])) == (plain, bot), "the same runs in both tables"


def test_goals_point_the_right_way() -> None:
    slower = figures.Ratio("latency", floor=10, bot=25, goal=2)
    faster = figures.Ratio("throughput", floor=10, bot=9.5, goal=0.9, at_least=True)
    assert not slower.met and faster.met
    assert figures.Ratio("throughput", floor=10, bot=8, goal=0.9, at_least=True).met is False


def test_pending_list_reads_p95_when_store_bench_has_it_else_its_median() -> None:
    median_only = (
        "\nStore\n| operation | ms | notes |\n|---|---|---|\n"
        "| record a decision | 11.7 | n |\n| list one reviewer's pending | 63.8 | n |"
    )
    with_p95 = (
        "\nStore\n| operation | p50 ms | p95 ms | notes |\n|---|---|---|---|\n"
        "| record a decision | 9.0 | 11.0 | n |\n| list one reviewer's pending | 12.5 | 18.25 | n |"
    )
    assert figures.listing_figure([median_only]) == (63.8, "median")
    assert figures.listing_figure(["no table", with_p95]) == (18.25, "p95")


def test_pending_list_reads_store_bench_s_own_p95_row() -> None:
    """store_bench prints the p50 and the p95 as rows of their own: the p95 row is read."""
    rows = (
        "\nStore\n| operation | ms | notes |\n|---|---|---|\n"
        "| list one reviewer's pending approvals (50 shown), p50 | 11.0 | x |\n"
        "| list one reviewer's pending approvals, p95 | 17.5 | x |\n"
    )
    assert figures.listing_figure([rows]) == (17.5, "p95")
