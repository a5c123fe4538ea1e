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
_ADMIN = re.compile(r"admin endpoints on [^:]+:(\d+)")


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
        "ADMIN_PORT": "0",
    }
    env.update(extra)
    return env


class BotProcess:
    SERVE = ("-m", "bot", "serve", "--http", "--host", "127.0.0.1", "--port", "0")

    def __init__(
        self, env: dict[str, str], sandbox: SlackSandbox, *, args: tuple[str, ...] = SERVE
    ) -> None:
        """``args``: what the Python interpreter runs; it must log "serving HTTP on h:port"."""
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.admin_port: int | None = None
        self.log: list[str] = []
        """What the bot logged (complete once it has stopped)."""
        self._reader = threading.Thread(target=self._keep_log, daemon=True)
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
            self.log.append(line)
            admin = _ADMIN.search(line)
            if admin:
                self.admin_port = int(admin.group(1))
            match = _LISTENING.search(line)
            if match:
                self._reader.start()
                return int(match.group(1))
        raise AssertionError("bot exited before listening:\n" + "".join(seen))

    def _keep_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def rss_kib(self, field: str = "VmRSS") -> int:
        """Resident memory (``VmRSS``) or its peak (``VmHWM``), from /proc."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(ln for ln in status.splitlines() if ln.startswith(field + ":"))
        return int(line.split()[1])

    def stop(self, *, patience: float = 60.0) -> int:
        """Stop it as an operator would (SIGTERM: finish in-flight work); one still running
        after ``patience`` seconds is killed, so a stuck bot never outlives its test."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=patience)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        self._reader.join(timeout=10)
        return code
