"""The bot against the floor a user would otherwise run, in one run: ``python -m bench.ratios``.

Each floor runs on the same machine, in the same invocation, driven by the same client code as
the bot (see bench/floors.py). ``--quick`` is a smoke run at a tiny scale.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.breakdown import bursts_line, cpu_table, to_result_table
from bench.common import fresh_database, pct
from bench.cpu import Pids, Spent, database_backends, durable_write_ms, metered
from bench.figures import Measured, Ratio, Report, pending_list
from bench.floors import WORKER_THREADS, BareBoltProcess, durable_to_result, plain_throughput
from bench.http_bench import (
    SLOW,
    click_all,
    click_to_result,
    integrity_check,
    plain_resumes,
    start_runs,
    wait_done,
    wait_settled,
)
from bot.sandbox import people
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from bot.sandbox.state import Message

RESUME_SECONDS = "0.03"  # the ~30 ms resume of the overhead figure
AGENT = SLOW["AGENT"]
NO_TOOL = "tool_seconds=0"  # throughput: the resume itself, no tool time
TIMED = f"timed change tool_seconds={RESUME_SECONDS}"
PRODUCTION_DEFAULTS = ("MAINTENANCE_INTERVAL_SECONDS", "CARD_RETRY_SECONDS")
"""Settings the sandbox shortens for tests that the bot runs with as shipped here: sweeping
every 0.3 s would spend CPU a deployment does not (its default is every 30 s)."""


@dataclass(frozen=True)
class Scale:
    clicks: int = 200  # concurrent clicks, which are also the pending approvals clicked at once
    resumes: int = 30
    """Single click-to-result runs for the overhead median (with 8, that median moved by up
    to 14 ms between runs of the same code)."""
    store: tuple[int, int, int] | None = None  # (requests, pending, audit); None: store_bench's
    bursts: int = 3  # bursts of concurrent clicks, each on fresh pending approvals


FULL = Scale()
QUICK = Scale(clicks=5, resumes=3, store=(2_000, 100, 10_000), bursts=2)


@contextmanager
def _sandbox() -> Iterator[SlackSandbox]:
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    try:
        yield sandbox
    finally:
        sandbox.stop()


def _snapshot(cards: Sequence[Message]) -> list[Message]:
    """The cards as they were before any click, so the floor gets the very same payloads."""
    return [dataclasses.replace(c, blocks=copy.deepcopy(c.blocks), edited_at=[]) for c in cards]


def _parts(url: str, **processes: Pids) -> dict[str, Pids]:
    """The benchmark's own process (client, Slack double or plain LangGraph), the database's
    backends, and the named processes."""
    return {
        **processes,
        "benchmark process": lambda: [os.getpid()],
        "PostgreSQL backends": database_backends(url),
    }


def _burst(
    bot: BotProcess, sandbox: SlackSandbox, n: int, *, parts: dict[str, Pids], spent: Spent
) -> tuple[list[float], float, list[Message]]:
    """n pending approvals clicked at once: their acks, approvals completed per second (the CPU
    they took is added to ``spent``), and the clicks as they were, for the floor."""
    _slash, cards = start_runs(bot, sandbox, n, f"change {{i}} {NO_TOOL}")
    wait_settled(bot)
    same_clicks = _snapshot(cards)
    with metered(parts) as this:
        start = time.perf_counter()
        acks = click_all(bot, cards)
        wait_done(sandbox, cards)
        rate = n / (time.perf_counter() - start)
    spent.add(this)
    return acks, rate, same_clicks


def _bot(
    bot: BotProcess, sandbox: SlackSandbox, scale: Scale, *, parts: dict[str, Pids]
) -> tuple[Measured, list[list[Message]]]:
    """``scale.bursts`` bursts of clicks (one burst's p99 moves by a factor of 2 to 5 from one
    to the next on two cores: the figures are the median burst's), then single runs clicked one
    at a time, click to the run's result on the card."""
    spent = Spent()
    bursts = [_burst(bot, sandbox, scale.clicks, parts=parts, spent=spent)]
    # The single clicks come after one burst, as they did when there was one: the same
    # state of the store (its tables, its vacuum), so their figures compare across days.
    to_result = []
    for _ in range(scale.resumes):
        _slash, cards = start_runs(bot, sandbox, 1, TIMED)
        to_result.append(click_to_result(bot, sandbox, cards[0]))
    for _ in range(scale.bursts - 1):
        bursts.append(_burst(bot, sandbox, scale.clicks, parts=parts, spent=spent))
    rss, peak = bot.rss_kib() / 1024, bot.rss_kib("VmHWM") / 1024
    measured = Measured(
        acks=[acks for acks, _rate, _clicks in bursts],
        rates=[rate for _acks, rate, _clicks in bursts],
        to_result=to_result,
        rss_mib=rss,
        peak_mib=peak,
        cpu=spent.per(scale.clicks * scale.bursts),
    )
    return measured, [clicks for _acks, _rate, clicks in bursts]


def _floors(
    measured: Measured,
    *,
    env: dict[str, str],
    sandbox: SlackSandbox,
    bursts: list[list[Message]],
) -> None:
    """The bare Bolt app acking the very same clicks, burst by burst; plain LangGraph on the
    bot's database, as many times."""
    floor = BareBoltProcess(env, sandbox)
    bolt = Spent()
    try:
        click_all(floor, bursts[0][:1])  # Bolt's first request sets itself up
        for clicks in bursts:
            with metered({"bolt": lambda: [floor.proc.pid]}) as spent:
                measured.floor_acks.append(click_all(floor, clicks))
            bolt.add(spent)
        measured.floor_rss_mib = floor.rss_kib() / 1024
    finally:
        floor.stop()
    n = len(bursts[0])
    measured.bolt_cpu_ms = bolt.per(n * len(bursts))["bolt"]
    url, workdir = env["DATABASE_URL"], Path(env["WORKSPACE_DIR"])
    plain = Spent()
    for _ in bursts:
        measured.floor_rates.append(_plain_rate(url, n=n, spent=plain))
    measured.floor_cpu = plain.per(n * len(bursts))
    measured.write_cpu_ms = durable_write_ms(url)
    k = len(measured.to_result)
    measured.floor_resumes = plain_resumes(url, workdir / "plain", AGENT, TIMED, k)
    measured.durable_resumes = durable_to_result(env, sandbox, k=k, request=TIMED)


def _plain_rate(url: str, *, n: int, spent: Spent) -> float:
    """Plain LangGraph resuming n threads at once; the CPU it took is added to ``spent``."""
    meter = metered(_parts(url))
    rate = plain_throughput(url, n=n, request=f"plain {NO_TOOL}", during=lambda: meter)
    spent.add(meter.spent)
    return rate


@contextmanager
def _worker_process(env: dict[str, str], *, separate: bool) -> Iterator[list[int]]:
    """``separate``: the decision work runs in an ``approval-bot worker`` process of its own
    (niced), and ``serve`` only verifies, stores and acks (its INBOX_WORKERS is off). Yields
    the worker's pid, if any."""
    if not separate:
        yield []
        return
    # At a lower CPU priority, as an operator would run it: on a busy machine acks come first.
    worker = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "bot", "worker"], env=env)
    try:
        yield [worker.pid]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def against_floors(
    workdir: Path, scale: Scale, *, separate_worker: bool = False
) -> tuple[list[Ratio], list[str]]:
    approvals = scale.clicks * scale.bursts + scale.resumes  # every burst and single click
    with fresh_database() as url, _sandbox() as sandbox:
        env = bot_env(sandbox, url, workdir / "ws", BENCH_TOOL_SECONDS="0", **SLOW)
        env["CLAIM_LEASE_SECONDS"] = "60"
        for test_setting in PRODUCTION_DEFAULTS:  # the sweeps run as often as they ship
            env.pop(test_setting)
        if separate_worker:
            env["INBOX_WORKERS"] = "false"
        bot = BotProcess(env, sandbox)
        try:
            with _worker_process(env, separate=separate_worker) as worker:
                parts = _parts(url, **{"approval-bot": lambda: [bot.proc.pid, *worker]})
                measured, bursts = _bot(bot, sandbox, scale, parts=parts)
        finally:
            bot.stop()
        _floors(measured, env=env, sandbox=sandbox, bursts=bursts)
        integrity = integrity_check(url, approvals)
    return _ratios(measured, scale), [
        bursts_line(measured),
        f"\nRSS of `approval-bot serve` after {approvals} approvals: "
        f"{measured.rss_mib:.0f} MiB (peak {measured.peak_mib:.0f} MiB); "
        f"the bare Bolt app: {measured.floor_rss_mib:.0f} MiB",
        integrity.strip(),
        to_result_table(measured),
        cpu_table(measured),
    ]


def _ratios(m: Measured, scale: Scale) -> list[Ratio]:
    n, k, b = scale.clicks, scale.resumes, scale.bursts
    return [
        Ratio(
            f"ack p99 ms, {n} concurrent signed clicks (median of {b} bursts)",
            statistics.median(pct(acks, 99) for acks in m.floor_acks) * 1000,
            statistics.median(pct(acks, 99) for acks in m.acks) * 1000,
            2,
        ),
        Ratio(
            f"approvals/s, {n} pending clicked at once ({WORKER_THREADS} workers, median of {b})",
            statistics.median(m.floor_rates),
            statistics.median(m.rates),
            0.9,
            at_least=True,
        ),
        Ratio(
            f"click -> result ms, ~{float(RESUME_SECONDS) * 1000:.0f} ms resume (median of {k})",
            statistics.median(m.floor_resumes) * 1000,
            statistics.median(m.to_result) * 1000,
            1.5,
        ),
    ]


def measure(
    scale: Scale = FULL,
    *,
    store_blocks: Sequence[str] | None = None,
    separate_worker: bool = False,
) -> Report:
    """Every ratio; ``store_blocks``: store_bench's output when the caller already ran it."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="approval-ratios-") as folder:
        ratios, notes = against_floors(Path(folder), scale, separate_worker=separate_worker)
    if separate_worker:
        notes.append("decision work in a separate `approval-bot worker` process")
    ratios.append(pending_list(scale.store, store_blocks))
    notes.append(f"ratios took {time.perf_counter() - started:.0f} s")
    return Report(ratios, notes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ratios", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny scale, a smoke test")
    parser.add_argument(
        "--separate-worker",
        action="store_true",
        help="serve only acks; an `approval-bot worker` process does the decision work",
    )
    args = parser.parse_args(argv)
    report = measure(QUICK if args.quick else FULL, separate_worker=args.separate_worker)
    print(report.render(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
