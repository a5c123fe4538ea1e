"""Fault injection for crash tests: ``APPROVAL_BOT_FAULT=<point>`` kills the process (SIGKILL)
the first time it reaches that point. Unset in production, where this does nothing."""

from __future__ import annotations

import os
import signal

POINTS = ("after_decision", "after_claim", "inside_tool", "after_tool", "before_card_update")


def fault_point(name: str) -> None:
    if os.environ.get("APPROVAL_BOT_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
