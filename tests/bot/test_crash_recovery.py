"""Kill -9 the bot at each point of the decision pipeline; a new process finishes the job:
every request reaches a final state, each effect happens once, no decision is lost, and the
card and the thread show the outcome. Real processes, real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_runtime.agents.workspace import Workspace
from agent_runtime.faults import POINTS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from store.db import Database
from store.models import ApprovalRequest, Decision
from tests.bot.flows import SEND


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_point_is_finished_by_the_next_process(point, pg_url, tmp_path: Path):
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    state = sandbox.state
    workspace = tmp_path / "workspace"
    crashing = BotProcess(bot_env(sandbox, pg_url, workspace, APPROVAL_BOT_FAULT=point), sandbox)
    try:
        crashing.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(
            lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
        )
        approve = next(b for b in buttons(card) if b.text == "Approve")
        crashing.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
        assert crashing.proc.wait(timeout=60) == -9, f"the bot should have died at {point}"
    finally:
        if crashing.proc.poll() is None:
            crashing.kill()

    survivor = BotProcess(bot_env(sandbox, pg_url, workspace), sandbox)
    try:
        results = state.wait_for(
            lambda: (
                [m for m in state.thread(people.CHANNEL, root.ts) if m.text.startswith("Run ")]
                or None
            ),
            timeout=60,
        )
        state.wait_for(lambda: not buttons(state.message(card.channel, card.ts)), timeout=30)
    finally:
        survivor.stop()
        sandbox.stop()

    assert len(results) == 1 and "message sent to partner@example.com" in results[0].text
    assert [e["tool"] for e in Workspace(workspace).effects()] == ["send_external_message"]
    card_now = json.dumps(state.message(card.channel, card.ts).blocks)
    assert f"<@{people.RELEASE_MANAGER}> approved" in card_now
    db = Database(pg_url)
    with db.transaction() as s:
        assert s.scalars(select(ApprovalRequest.status)).all() == ["resolved"]
        assert len(s.scalars(select(Decision)).all()) == 1
    db.dispose()
