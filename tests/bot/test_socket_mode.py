"""Socket Mode, chosen when SLACK_APP_TOKEN is set: the same flow over the sandbox's WebSocket."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from unittest.mock import ANY

from agent_runtime.agents.workspace import Workspace
from bot.sandbox import people
from bot.sandbox.driver import SlackDriver, buttons
from bot.sandbox.server import SANDBOX_APP_TOKEN, SANDBOX_TOKEN, SlackSandbox
from tests.bot.flows import SEND
from tests.bot.scrape import sample, scrape, status


def test_serve_with_app_token_works_over_socket_mode(tmp_path: Path):
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    env = {
        **{k: v for k, v in os.environ.items() if k != "SLACK_SIGNING_SECRET"},
        "SLACK_BOT_TOKEN": SANDBOX_TOKEN,
        "SLACK_APP_TOKEN": SANDBOX_APP_TOKEN,
        "SLACK_API_URL": sandbox.api_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'socket.db'}",
        "WORKSPACE_DIR": str(tmp_path / "workspace"),
        "ADMIN_PORT": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        admin = ""
        for line in proc.stderr:
            if found := re.search(r"admin endpoints on [^:]+:(\d+)", line):
                admin = f"http://127.0.0.1:{found.group(1)}"
            if re.search(r"serving in Socket Mode", line):
                break
        else:
            raise AssertionError("the bot did not start in Socket Mode")
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        state = sandbox.state
        driver = SlackDriver(sandbox=sandbox)  # no URL: deliveries go over the WebSocket
        assert sandbox.socket_mode is not None
        for event in ("x", [1]):  # acked (not redelivered for ever), and nothing else happens
            bad = {"type": "event_callback", "team_id": "T0SANDBOX", "event": event}
            assert sandbox.socket_mode.send("events_api", bad, timeout=30) == {"envelope_id": ANY}

        driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(
            lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
        )
        approve = next(b for b in buttons(card) if b.text == "Approve")
        driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
        result = state.wait_for(
            lambda: next(
                (m for m in state.thread(people.CHANNEL, root.ts) if m.text.startswith("Run ")),
                None,
            )
        )
        # Socket Mode has no HTTP port of its own: the admin port serves metrics and health.
        assert status(admin + "/healthz") == (200, b"ok\n")
        assert status(admin + "/readyz") == (200, b"ok\n")
        families = scrape(admin)
        assert sample(families, "clicks", "_total") == 1.0
        assert sample(families, "ack_seconds", "_count", mode="socket") >= 2.0
        assert families["approval_bot_pending_approvals"].type == "gauge"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        sandbox.stop()
    assert "message sent to partner@example.com" in result.text
    assert [e["tool"] for e in Workspace(tmp_path / "workspace").effects()] == [
        "send_external_message"
    ]
    assert "apps.connections.open" not in state.calls  # app token calls are not bot calls
