"""Ack latency, decision overhead, throughput and memory, against real bot processes in HTTP
mode on PostgreSQL, driven through the local Slack sandbox with signed requests."""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from agent_runtime.agents.workspace import Workspace
from agent_runtime.graph_runtime import DEFAULT_AGENT, close_checkpointer, open_runtime
from agent_runtime.policy import load_policy
from agent_runtime.wire import ResumeDecision, build_resume, pending_interrupts
from bench.common import concurrently, fresh_database, ms, pct, table
from bot.blocks.approval_card import HEADERS
from bot.metrics import PREFIX
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from bot.sandbox.state import Message
from store.db import Database
from store.statuses import RequestStatus

SLOW = {"AGENT": "bench.slow_graph:build_graph", "WORKER_QUEUE": "5000"}
REVIEWERS = [people.RELEASE_MANAGER, people.RELEASE_MANAGER_2, people.SECURITY]
READING_SECONDS = 0.25
"""How long a single timed click waits after its card appeared (no reviewer clicks sooner)."""


def start_runs(
    bot: BotProcess, sandbox: SlackSandbox, n: int, text: str = "change {i}"
) -> tuple[list[float], list[Message]]:
    """n concurrent slash commands; returns their ack latencies and the n new cards."""
    state = sandbox.state
    seen = {m.ts for m in state.messages}

    def command(i: int) -> int:
        return bot.driver.slash_command(
            user=people.REQUESTER, channel=people.CHANNEL, text=text.replace("{i}", str(i))
        ).status

    results = concurrently([(lambda i=i: command(i)) for i in range(n)])
    assert all(status == 200 for _, status in results), [s for _, s in results if s != 200]

    def new_cards() -> list[Message] | None:
        cards = [m for m in state.messages if m.ts not in seen and m.thread_ts and buttons(m)]
        return cards if len(cards) == n else None

    return [s for s, _ in results], state.wait_for(new_cards, timeout=300)


def wait_settled(bot: BotProcess, timeout: float = 120) -> None:
    """Until the bot's worker pool is idle: the runs just started have posted their cards and
    finished what follows (the card's reference stored, the reviewers told). A burst of clicks
    timed before that would also time the runs' start, which the floors never do."""
    assert bot.admin_port is not None, "the bot logs its admin port at start"
    url = f"http://127.0.0.1:{bot.admin_port}/metrics"
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(url, timeout=10) as response:
            scraped = response.read().decode("utf-8")
        busy = re.search(rf"^{PREFIX}_worker_tasks_in_flight (\S+)$", scraped, re.M)
        assert busy is not None, "the bot reports its worker pool on /metrics"
        if float(busy.group(1)) == 0:
            return
        assert time.monotonic() < deadline, "the bot's worker pool never went idle"
        time.sleep(0.02)


def click_all(bot: BotProcess, cards: list[Message]) -> list[float]:
    jobs = []
    for i, card in enumerate(cards):
        approve = next(b for b in buttons(card) if b.text == "Approve")
        jobs.append(
            lambda c=card, b=approve, u=REVIEWERS[i % 3]: (
                bot.driver.click(user=u, message=c, button=b).status
            )
        )
    results = concurrently(jobs)
    assert all(status == 200 for _, status in results), "every click is acked"
    return [s for s, _ in results]


def click_to_result(bot: BotProcess, sandbox: SlackSandbox, card: Message) -> float:
    """Seconds from one Approve click to the card showing the result. The click comes
    ``READING_SECONDS`` after the card appeared (or, when the cards were all posted first,
    after the previous result), as a reviewer's does: the work of posting the card (storing
    its reference, telling the reviewers) is not the decision's to pay for."""
    time.sleep(READING_SECONDS)
    before = time.monotonic()
    click_all(bot, [card])
    wait_done(sandbox, [card])
    return card.edited_at[-1] - before


def wait_done(sandbox: SlackSandbox, cards: list[Message], timeout: float = 300) -> None:
    """Until every card shows its request resolved (a quick resume updates it once, a longer
    one shows "resuming" first)."""
    sandbox.state.wait_for(lambda: all(_resolved(c) for c in cards), timeout=timeout)


def _resolved(card: Message) -> bool:
    header = card.blocks[0] if card.blocks else {}
    return header.get("text", {}).get("text") == HEADERS[RequestStatus.RESOLVED]


def ack_latency_and_memory(workdir: Path) -> list[str]:
    out_rows, mem_rows, integrity = [], [], []
    with fresh_database() as url:
        sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
        env = bot_env(sandbox, url, workdir / "ws-ack", BENCH_TOOL_SECONDS="0.5", **SLOW)
        env["CLAIM_LEASE_SECONDS"] = "60"
        bot = BotProcess(env, sandbox)
        try:
            time.sleep(1.0)  # let the process settle before reading idle memory
            mem_rows.append(("serve idle", f"{bot.rss_kib() / 1024:.0f}"))
            total = 0
            for n in (1, 10, 50, 200):
                slash, cards = start_runs(bot, sandbox, n)
                clicks = click_all(bot, cards)
                wait_done(sandbox, cards)
                total += n
                for kind, lat in (("slash command", slash), ("button click", clicks)):
                    out_rows.append(
                        (
                            kind,
                            n,
                            ms(pct(lat, 50)),
                            ms(pct(lat, 95)),
                            ms(pct(lat, 99)),
                            ms(max(lat)),
                        )
                    )
            mem_rows.append(("serve peak under load (VmHWM)", f"{bot.rss_kib('VmHWM') / 1024:.0f}"))
        finally:
            bot.stop()
            sandbox.stop()
        integrity.append(integrity_check(url, total))
    return [
        table(
            "Ack latency in ms (each resume takes 0.5 s; the ack does not wait for it)",
            ["request", "concurrent", "p50", "p95", "p99", "max"],
            out_rows,
        ),
        table("Memory of `approval-bot serve` (MiB)", ["state", "RSS MiB"], mem_rows),
        *integrity,
    ]


def integrity_check(url: str, expected: int) -> str:
    db = Database(url)
    with db.engine.connect() as conn:
        decisions = conn.exec_driver_sql("SELECT count(*) FROM decisions").scalar()
        resumed = conn.exec_driver_sql(
            "SELECT count(*) FROM audit_events WHERE kind = 'resumed'"
        ).scalar()
    db.dispose()
    ok = decisions == expected and resumed == expected
    return (
        f"\nIntegrity: {decisions} decisions and {resumed} resumes for {expected} clicks "
        f"({'no lost or duplicated decision' if ok else 'MISMATCH'})"
    )


def throughput(workdir: Path, n: int = 100) -> list[str]:
    with fresh_database() as url:
        sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
        env = bot_env(sandbox, url, workdir / "ws-tp", BENCH_TOOL_SECONDS="0", **SLOW)
        bot = BotProcess(env, sandbox)
        try:
            _slash, cards = start_runs(bot, sandbox, n)
            start = time.perf_counter()
            click_all(bot, cards)
            wait_done(sandbox, cards)
            elapsed = time.perf_counter() - start
        finally:
            bot.stop()
            sandbox.stop()
        check = integrity_check(url, n)
    return [
        table(
            "Throughput (100 pending approvals clicked at once; tool takes 0 s)",
            ["approvals", "seconds", "approvals/s"],
            [(n, f"{elapsed:.2f}", f"{n / elapsed:.1f}")],
        ),
        check,
    ]


OVERHEAD_CASES = (
    # (label, AGENT, extra environment, request)
    (
        "the bundled Deep Agent, offline model (a resume of a few tens of ms)",
        DEFAULT_AGENT,
        {},
        'send_external_message {"recipient": "p@example.com", "text": "hi"}',
    ),
    (
        "a graph whose tool takes 0.5 s, like a real side effect",
        "bench.slow_graph:build_graph",
        {"BENCH_TOOL_SECONDS": "0.5"},
        "slow change",
    ),
)


def overhead(workdir: Path, k: int = 8) -> list[str]:
    """Click to card, through the bot, against a plain resume of the same agent on the same
    PostgreSQL checkpointer, in the same run."""
    rows = []
    for label, agent, extra, request in OVERHEAD_CASES:
        with fresh_database() as url:
            sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
            # Both updates drawn, for the first column: the decision shown as the resume starts.
            env = bot_env(
                sandbox,
                url,
                workdir / "ws-oh",
                AGENT=agent,
                RESUMING_CARD_AFTER_SECONDS="0",
                **extra,
            )
            bot = BotProcess(env, sandbox)
            started, finished = [], []
            try:
                for _ in range(k):
                    _slash, cards = start_runs(bot, sandbox, 1, request)
                    before = time.monotonic()
                    click_all(bot, cards)
                    wait_done(sandbox, cards)
                    started.append(cards[0].edited_at[0] - before)
                    finished.append(cards[0].edited_at[-1] - before)
            finally:
                bot.stop()
                sandbox.stop()
            os.environ.update(extra)
            base = statistics.median(plain_resumes(url, workdir / "ws-plain", agent, request, k))
        done = statistics.median(finished)
        rows.append(
            (label, ms(statistics.median(started)), ms(done), ms(base), f"{done / base:.2f}")
        )
    return [
        table(
            f"Decision overhead, median of {k} (same agent, same PostgreSQL checkpointer)",
            [
                "agent",
                "click -> decision on card (resume starts)",
                "click -> card updated after resume",
                "plain invoke(Command(resume))",
                "ratio",
            ],
            rows,
        )
    ]


def plain_resumes(url: str, workspace: Path, agent: str, request: str, k: int) -> list[float]:
    runtime = open_runtime(
        database_url=url,
        agent=agent,
        model="offline",
        policy=load_policy(None),
        workspace=Workspace(workspace).ensure(),
    )
    timings = []
    try:
        for i in range(k):
            thread = f"plain-{i}"
            runtime.invoke({"messages": [HumanMessage(request)]}, thread)
            pending = pending_interrupts(runtime.state(thread).interrupts)[0]
            command: Any = build_resume(pending, [ResumeDecision(type="approve")])
            start = time.perf_counter()
            runtime.graph.invoke(command, runtime.config(thread))
            timings.append(time.perf_counter() - start)
            assert not runtime.state(thread).interrupts
    finally:
        close_checkpointer(runtime.checkpointer)
    return timings


def run_all() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="approval-bench-") as folder:
        work = Path(folder)
        return [*ack_latency_and_memory(work), *overhead(work), *throughput(work)]
