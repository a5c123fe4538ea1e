"""The bot as a real process (``python -m bot serve``) for restart, crash and load runs."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path

from bot.sandbox.driver import SlackDriver
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox

_LISTENING = re.compile(r"serving HTTP on [^:]+:(\d+)")


def bot_env(sandbox: SlackSandbox, database_url: str, workspace: Path, **extra: str) -> dict:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "APPROVAL_BOT_"))},
        "SLACK_BOT_TOKEN": SANDBOX_TOKEN,
        "SLACK_SIGNING_SECRET": secrets.token_hex(16),
        "SLACK_API_URL": sandbox.api_url,
        "DATABASE_URL": database_url,
        "WORKSPACE_DIR": str(workspace),
        "CLAIM_LEASE_SECONDS": "1",
        "MAINTENANCE_INTERVAL_SECONDS": "0.3",
        "CARD_RETRY_SECONDS": "0",
    }
    env.update(extra)
    return env


class BotProcess:
    def __init__(self, env: dict[str, str], sandbox: SlackSandbox) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--http", "--host", "127.0.0.1", "--port", "0"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.port = self._wait_until_listening()
        self.driver = SlackDriver(
            sandbox=sandbox,
            bot_url=f"http://127.0.0.1:{self.port}",
            signing_secret=env["SLACK_SIGNING_SECRET"],
        )

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

    def rss_kib(self, field: str = "VmRSS") -> int:
        """Resident memory (``VmRSS``) or its peak (``VmHWM``), from /proc."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(ln for ln in status.splitlines() if ln.startswith(field + ":"))
        return int(line.split()[1])

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)
