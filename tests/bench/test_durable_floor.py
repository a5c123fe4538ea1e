"""The durable floor does the durable work it stands for: a click stored before its ack, the
decision recorded before the resume, the thread resumed once, the outcome recorded, the card
updated."""

from __future__ import annotations

from pathlib import Path

import psycopg

from bench.floors import DurableFloorProcess
from bench.http_bench import SLOW, click_all, wait_done
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import bot_env
from bot.sandbox.server import SlackSandbox


def test_a_click_is_stored_decided_resumed_and_shown_once(pg_url: str, tmp_path: Path) -> None:
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    try:
        env = bot_env(sandbox, pg_url, tmp_path / "ws", **SLOW)
        floor = DurableFloorProcess(env, sandbox, cards=1, request="change tool_seconds=0")
        try:
            (card,) = [m for m in sandbox.state.messages if buttons(m)]
            click_all(floor, [card])
            wait_done(sandbox, [card], timeout=60)
        finally:
            floor.stop()
    finally:
        sandbox.stop()
    with psycopg.connect(pg_url) as conn:
        clicks = conn.execute("SELECT count(*) FROM floor_clicks").fetchone()
        decisions = conn.execute("SELECT count(*) FROM floor_decisions").fetchone()
        statuses = conn.execute("SELECT status FROM floor_requests").fetchall()
        thread = conn.execute("SELECT thread FROM floor_requests").fetchone()
        steps = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread[0],)
        ).fetchone()
    assert clicks == (1,) and decisions == (1,) and statuses == [("resolved",)]
    assert steps is not None and steps[0] > 2, "the thread ran to its interrupt and on"
