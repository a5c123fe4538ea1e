"""A paused run survives the bot process: kill it, start a new one on the same database, approve."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.agents.workspace import Workspace
from bot.sandbox import people
from bot.sandbox.driver import SlackDriver, buttons
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from tests.bot.flows import SEND

_LISTENING = re.compile(r"serving HTTP on [^:]+:(\d+)")


class BotProcess:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--http", "--host", "127.0.0.1", "--port", "0"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.port = self._wait_until_listening()

    def _wait_until_listening(self) -> int:
        assert self.proc.stderr is not None
        seen = []
        for line in self.proc.stderr:
            seen.append(line)
            match = _LISTENING.search(line)
            if match:
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return int(match.group(1))
        raise AssertionError("bot exited before listening:\n" + "".join(seen))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def sandbox() -> Iterator[SlackSandbox]:
    box = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    yield box
    box.stop()


def test_run_resumes_after_the_bot_process_is_killed(pg_url, sandbox, tmp_path: Path):
    secret = secrets.token_hex(16)
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": SANDBOX_TOKEN,
        "SLACK_SIGNING_SECRET": secret,
        "SLACK_API_URL": sandbox.api_url,
        "DATABASE_URL": pg_url,
        "WORKSPACE_DIR": str(tmp_path / "workspace"),
    }
    env.pop("SLACK_APP_TOKEN", None)
    state = sandbox.state

    first = BotProcess(env)
    try:
        driver = SlackDriver(
            sandbox=sandbox, bot_url=f"http://127.0.0.1:{first.port}", signing_secret=secret
        )
        driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(
            lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
        )
    finally:
        first.kill()

    second = BotProcess(env)
    try:
        driver = SlackDriver(
            sandbox=sandbox, bot_url=f"http://127.0.0.1:{second.port}", signing_secret=secret
        )
        approve = next(b for b in buttons(card) if b.text == "Approve")
        assert driver.click(user=people.RELEASE_MANAGER, message=card, button=approve).status == 200
        result = state.wait_for(
            lambda: next(
                (
                    m
                    for m in state.thread(people.CHANNEL, root.ts)
                    if m.text.startswith("Run finished")
                ),
                None,
            ),
            timeout=60,
        )
    finally:
        second.proc.send_signal(signal.SIGTERM)
        second.proc.wait(timeout=60)

    assert "message sent to partner@example.com" in result.text
    effects = Workspace(tmp_path / "workspace").effects()
    assert [e["tool"] for e in effects] == ["send_external_message"]
    assert second.proc.returncode == 0, "SIGTERM stops the bot cleanly"
