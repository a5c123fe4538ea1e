"""The bot process the end-to-end tests drive: stopping one that hangs never hangs a test."""

from __future__ import annotations

import signal

from bot.sandbox.process import BotProcess
from bot.sandbox.server import SlackSandbox

DEAF = (
    "-c",
    "import logging, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('serving HTTP on 127.0.0.1:9', file=sys.stderr, flush=True); time.sleep(600)",
)


def test_a_bot_that_ignores_sigterm_is_killed_once_patience_runs_out() -> None:
    sandbox = SlackSandbox().start()
    try:
        bot = BotProcess({"SLACK_SIGNING_SECRET": "s"}, sandbox, args=DEAF)
        assert bot.stop(patience=0.5) == -signal.SIGKILL
        assert bot.proc.poll() is not None
        assert bot.stop(patience=0.5) == -signal.SIGKILL, "stopping twice is harmless"
    finally:
        sandbox.stop()
