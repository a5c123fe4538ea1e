"""A second floor for click -> result: the durable writes and checks that the product's
promises put on a click's path, and nothing else. A Bolt app served like the bot stores each
click and commits it before acking; a worker then commits the decision, checks that the
checkpoint still waits on the interrupt, resumes it with a plain ``Command(resume=...)``, reads
the checkpoint after, commits the outcome and updates the card. No policy, authorization, audit
chain, review slots, thread locks or leases, and no recovery: stored clicks are never replayed
after a crash, which a real bot does off the click's path (it adds nothing to a click's time).
What the bot spends beyond this floor is its own.

``python -m bench.durable_floor --threads N --max-body BYTES --cards K --request TEXT
--channel C --done-header H`` with SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, SLACK_API_URL and
DATABASE_URL set: interrupts K threads of the benchmark graph, posts a card with an Approve
button for each, then logs the port it listens on, as ``serve`` does.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from psycopg_pool import ConnectionPool
from slack_bolt import App
from slack_sdk import WebClient

from agent_runtime.graph_runtime import open_checkpointer
from bench import slow_graph
from bench.bare_bolt import serve

logger = logging.getLogger("bench.durable_floor")
APPROVE_ACTION = "durable_floor_approve"
RESUME = {"decisions": [{"type": "approve"}]}
TABLES = (
    "CREATE TABLE IF NOT EXISTS floor_clicks (id bigserial PRIMARY KEY, body text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS floor_requests (thread text PRIMARY KEY, status text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS floor_decisions (id bigserial PRIMARY KEY, thread text NOT NULL,"
    " reviewer text NOT NULL)",
)


@dataclass(frozen=True)
class Floor:
    pool: ConnectionPool
    graph: CompiledStateGraph
    client: WebClient
    done_header: str

    def store_click(self, body: dict[str, Any]) -> None:
        with self.pool.connection() as conn:  # commits on leaving
            conn.execute("INSERT INTO floor_clicks (body) VALUES (%s)", (json.dumps(body),))

    def decide(self, thread: str, *, reviewer: str, channel: str, ts: str) -> None:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT status FROM floor_requests WHERE thread = %s FOR UPDATE", (thread,)
            ).fetchone()
            if row is None or row[0] != "pending":
                return
            conn.execute(
                "INSERT INTO floor_decisions (thread, reviewer) VALUES (%s, %s)", (thread, reviewer)
            )
            conn.execute(
                "UPDATE floor_requests SET status = 'resuming' WHERE thread = %s", (thread,)
            )
        config: Any = {"configurable": {"thread_id": thread}}
        if not self.graph.get_state(config).interrupts:
            return
        self.graph.invoke(Command(resume=RESUME), config)
        done = not self.graph.get_state(config).interrupts
        with self.pool.connection() as conn:
            conn.execute(
                "UPDATE floor_requests SET status = %s WHERE thread = %s",
                ("resolved" if done else "failed", thread),
            )
        header = {"type": "header", "text": {"type": "plain_text", "text": self.done_header}}
        self.client.chat_update(channel=channel, ts=ts, text=self.done_header, blocks=[header])

    def post_cards(self, *, count: int, request: str, channel: str) -> None:
        for _ in range(count):
            thread = f"durable-{uuid.uuid4().hex[:12]}"
            config: Any = {"configurable": {"thread_id": thread}}
            self.graph.invoke({"messages": [HumanMessage(request)]}, config)
            with self.pool.connection() as conn:
                conn.execute(
                    "INSERT INTO floor_requests (thread, status) VALUES (%s, 'pending')", (thread,)
                )
            button = {
                "type": "button",
                "action_id": APPROVE_ACTION,
                "value": thread,
                "text": {"type": "plain_text", "text": "Approve"},
            }
            self.client.chat_postMessage(
                channel=channel,
                text="approve?",
                blocks=[{"type": "actions", "block_id": "decide", "elements": [button]}],
            )


def build_app(floor: Floor, workers: ThreadPoolExecutor) -> App:
    app = App(
        client=floor.client,
        signing_secret=os.environ["SLACK_SIGNING_SECRET"],
        process_before_response=False,
        token_verification_enabled=True,
    )

    @app.action(APPROVE_ACTION)
    def approve(ack: Any, body: dict[str, Any]) -> None:
        floor.store_click(body)
        ack()
        workers.submit(
            floor.decide,
            body["actions"][0]["value"],
            reviewer=body["user"]["id"],
            channel=body["container"]["channel_id"],
            ts=body["container"]["message_ts"],
        )

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.durable_floor")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--max-body", type=int, required=True)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--cards", type=int, required=True)
    parser.add_argument("--request", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--done-header", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    url = os.environ["DATABASE_URL"]
    pool = ConnectionPool(url, min_size=2, max_size=args.workers + args.threads, open=True)
    with pool.connection() as conn:
        for statement in TABLES:
            conn.execute(statement)
    client = WebClient(token=os.environ["SLACK_BOT_TOKEN"], base_url=os.environ["SLACK_API_URL"])
    graph = slow_graph.build_graph(open_checkpointer(url, pool_size=args.workers))
    floor = Floor(pool=pool, graph=graph, client=client, done_header=args.done_header)
    floor.post_cards(count=args.cards, request=args.request, channel=args.channel)
    app = build_app(floor, ThreadPoolExecutor(args.workers))
    serve(app, threads=args.threads, max_body=args.max_body)


if __name__ == "__main__":
    main()
