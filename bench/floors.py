"""What a user would run without the bot, measured the same way as the bot.

* A bare Bolt app that only acks button clicks (bench/bare_bolt.py), served by the bot's HTTP
  stack (waitress, Bolt's WSGI adapter, the same thread count and body limit), as a process.
* Plain LangGraph: the benchmark graph resumed with ``graph.invoke(Command(resume=...))`` from
  as many threads as the bot has workers, sharing one PostgresSaver pool.
* The durable floor (bench/durable_floor.py): the least a bot keeping the product's durability
  promises does between a click and its result, as a process served like the bot.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from agent_runtime.graph_runtime import close_checkpointer, open_checkpointer
from bench import slow_graph
from bench.http_bench import click_all, click_to_result, wait_done
from bot.blocks.approval_card import HEADERS
from bot.http_server import MAX_BODY, make_server
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess
from bot.sandbox.server import SlackSandbox
from bot.settings import Settings
from store.statuses import RequestStatus

HTTP_THREADS: int = inspect.signature(make_server).parameters["threads"].default
WORKER_THREADS: int = Settings.model_fields["worker_threads"].default
DB_POOL_SIZE: int = Settings.model_fields["db_pool_size"].default
APPROVE = {"decisions": [{"type": "approve"}]}


class BareBoltProcess(BotProcess):
    """The bare Bolt app as a real process, driven by the same client as the bot."""

    def __init__(self, env: dict[str, str], sandbox: SlackSandbox) -> None:
        args = ("-m", "bench.bare_bolt", "--threads", str(HTTP_THREADS))
        super().__init__(env, sandbox, args=(*args, "--max-body", str(MAX_BODY)))


def plain_throughput(
    url: str,
    *,
    n: int,
    request: str,
    workers: int = WORKER_THREADS,
    during: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> float:
    """Approvals completed per second: n interrupted threads of the benchmark graph, resumed
    all at once from ``workers`` threads on one PostgresSaver pool of the bot's size.
    ``during`` wraps the resumes alone (a CPU meter, say), while the pool is open."""
    saver = open_checkpointer(url, pool_size=DB_POOL_SIZE)
    graph = slow_graph.build_graph(saver)
    configs: list[Any] = [{"configurable": {"thread_id": f"floor-tp-{i}"}} for i in range(n)]
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(
                pool.map(
                    lambda c: graph.invoke({"messages": [HumanMessage(request)]}, c),
                    configs,
                )
            )
            assert all(graph.get_state(c).interrupts for c in configs), "every thread waits"
            go = threading.Event()

            def resume(config: Any) -> Any:
                go.wait()
                return graph.invoke(Command(resume=APPROVE), config)

            futures = [pool.submit(resume, c) for c in configs]
            with during():
                start = time.perf_counter()
                go.set()
                results = [f.result() for f in futures]
                elapsed = time.perf_counter() - start
    finally:
        close_checkpointer(saver)
    assert all(r["messages"][-1].content == "done" for r in results), "every resume completed"
    return n / elapsed


class DurableFloorProcess(BotProcess):
    """bench/durable_floor.py as a real process, with ``cards`` approvals waiting on it."""

    def __init__(
        self, env: dict[str, str], sandbox: SlackSandbox, *, cards: int, request: str
    ) -> None:
        args = (
            *("-m", "bench.durable_floor", "--threads", str(HTTP_THREADS)),
            *("--max-body", str(MAX_BODY), "--workers", str(WORKER_THREADS)),
            *("--cards", str(cards), "--request", request, "--channel", people.CHANNEL),
            *("--done-header", HEADERS[RequestStatus.RESOLVED]),
        )
        super().__init__(env, sandbox, args=args)


def durable_to_result(
    env: dict[str, str], sandbox: SlackSandbox, *, k: int, request: str
) -> list[float]:
    """Seconds from click to the card showing the result, k single clicks on the durable
    floor, clicked and awaited as the bot's are, after one untimed click (its first request
    and first pool use set things up, as the bot's did while its runs were started)."""
    seen = {m.ts for m in sandbox.state.messages}
    floor = DurableFloorProcess(env, sandbox, cards=k + 1, request=request)
    try:
        cards = [m for m in list(sandbox.state.messages) if m.ts not in seen and buttons(m)]
        assert len(cards) == k + 1, f"the durable floor posted {len(cards)} cards, not {k + 1}"
        click_all(floor, cards[:1])
        wait_done(sandbox, cards[:1])
        return [click_to_result(floor, sandbox, card) for card in cards[1:]]
    finally:
        floor.stop()
