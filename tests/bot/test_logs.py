"""``LOG_FORMAT=json``: one JSON object per line, each approval traceable by its ids, no token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from store.db import Database
from store.models import ApprovalRequest


@pytest.fixture
def sandbox():
    box = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    yield box
    box.stop()


def test_a_whole_approval_is_traceable_in_json_lines(sandbox, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    env = bot_env(sandbox, url, tmp_path / "workspace", LOG_FORMAT="json")
    state = sandbox.state
    bot = BotProcess(env, sandbox)
    try:
        send = 'send_external_message {"recipient": "a@example.com", "text": "hi"}'
        bot.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=send)
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(
            lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
        )
        approve = next(b for b in buttons(card) if b.text == "Approve")
        bot.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
        state.wait_for(
            lambda: any(m.text.startswith("Run ") for m in state.thread(people.CHANNEL, root.ts))
        )
    finally:
        assert bot.stop() == 0
    db = Database(url)
    with db.transaction() as s:
        request = s.query(ApprovalRequest).one()
        request_id, run_id = request.id, request.run_id
    db.dispose()

    lines = [json.loads(line) for line in bot.log]  # every line is one JSON object
    assert all({"timestamp", "level", "logger", "message"} <= set(line) for line in lines)
    mine = [line for line in lines if line.get("request_id") == request_id]
    events = [line.get("event") for line in mine]
    for kind in ("interrupt_recorded", "decision_recorded", "resumed"):
        assert kind in events, (kind, events)
    decided = next(line for line in mine if line.get("event") == "decision_recorded")
    assert decided["actor"] == people.RELEASE_MANAGER
    assert decided["run_id"] == run_id
    finished = [line for line in lines if line.get("run_id") == run_id]
    assert "run_completed" in [line.get("event") for line in finished]
    text = "\n".join(bot.log)
    assert SANDBOX_TOKEN not in text
    assert env["SLACK_SIGNING_SECRET"] not in text


def test_token_shaped_text_is_masked_and_bound_ids_are_added(capsys):
    import logging

    from agent_runtime import trace
    from bot import logs

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logs.configure(level=logging.INFO, fmt="json")
        with trace.bind(request_id="req-1", actor="U1"):
            logging.getLogger("approval-bot.test").info("token %s refused", "xoxb-1-2-abc")
    finally:
        root.handlers[:], root.level = saved
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["message"] == "token xoxb-*** refused"
    assert (line["request_id"], line["actor"], line["level"]) == ("req-1", "U1", "INFO")
