"""Fault injection for crash tests: ``APPROVAL_BOT_FAULT=<point>`` kills the process (SIGKILL)
the first time it reaches that point. Unset in production, where this does nothing."""

from __future__ import annotations

import logging
import os
import signal

CARD_POINTS = ("after_card_post",)
"""Points reached before anyone decides: the card is in Slack, its reference not yet stored."""
DECISION_POINTS = (
    "after_ack",
    "after_decision",
    "after_claim",
    "inside_tool",
    "after_tool",
    "after_resume",
    "before_card_update",
    "before_result",
)
"""Points reached between an approval and the run's result in its thread, in that order
(``after_ack``: the click is stored and acked, a worker has just claimed it)."""
REMOTE_POINTS = ("after_resume_sent",)
"""With the agent on LangGraph Server: a resume run is created there, not yet joined."""
POINTS = CARD_POINTS + DECISION_POINTS + REMOTE_POINTS


def fault_point(name: str) -> None:
    if os.environ.get("APPROVAL_BOT_FAULT") == name:
        for handler in logging.getLogger().handlers:
            handler.flush()  # the lines logged before the crash are in the log
        os.kill(os.getpid(), signal.SIGKILL)
