"""``approval-bot pause|resume``: the kill switch from a shell, for when Slack itself is part of
the incident. Whoever can run it already holds the database; it is audited under their name."""

from __future__ import annotations

import getpass
import logging

from agent_runtime.kill_switch import KillSwitch, SwitchOutcome
from agent_runtime.notifier import Notifier
from agent_runtime.policy import load_policy
from bot.errors import SWITCH_ANSWERS
from bot.settings import Settings
from bot.slack_notifier import SlackNotifier
from bot.slack_side import slack_client
from bot.workspaces import SingleWorkspace
from store.db import Database
from store.models import utcnow

logger = logging.getLogger(__name__)


def operator() -> str:
    return f"cli:{getpass.getuser()}"


def _notifier(settings: Settings) -> Notifier | None:
    """Announce in the escalation channel when a bot token is at hand; the switch holds
    without it."""
    if settings.slack_bot_token is None:
        return None  # multi-workspace installs: no one token to announce with from a shell
    return SlackNotifier(SingleWorkspace(slack_client(settings)))


def run_switch(settings: Settings, db: Database, *, pause: bool, reason: str | None) -> int:
    switch = KillSwitch(
        db=db,
        policy=load_policy(settings.policy_file),
        notifier=_notifier(settings),
        usergroup_members=lambda _group: frozenset(),
        clock=utcnow,
    )
    result = switch.pause(operator(), reason=reason) if pause else switch.resume(operator())
    print(SWITCH_ANSWERS[result.outcome].replace("`/approvals resume`", "`approval-bot resume`"))
    state = result.state
    if state.paused:
        print(
            f"paused by {state.changed_by} at {state.changed_at:%Y-%m-%d %H:%M} UTC"
            + (f": {state.reason}" if state.reason else "")
        )
    return 0 if result.outcome in (SwitchOutcome.PAUSED, SwitchOutcome.RESUMED) else 1
