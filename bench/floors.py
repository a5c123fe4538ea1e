"""What a user would run without the bot, measured the same way as the bot.

* A bare Bolt app that only acks button clicks (bench/bare_bolt.py), served by the bot's HTTP
  stack (waitress, Bolt's WSGI adapter, the same thread count and body limit), as a process.
* Plain LangGraph: the benchmark graph resumed with ``graph.invoke(Command(resume=...))`` from
  as many threads as the bot has workers, sharing one PostgresSaver pool.
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
from bot.http_server import MAX_BODY, make_server
from bot.sandbox.process import BotProcess
from bot.sandbox.server import SlackSandbox
from bot.settings import Settings

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
