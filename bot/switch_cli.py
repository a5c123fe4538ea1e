"""``approval-bot pause|resume``: the kill switch from a shell, for when Slack itself is part of
the incident. Whoever can run it already holds the database; it is audited under their name."""

from __future__ import annotations

import getpass
import logging

from agent_runtime.kill_switch import KillSwitch, SwitchOutcome
from agent_runtime.notifier import Notifier
from agent_runtime.policy import load_policy
from bot.errors import SWITCH_ANSWERS
from bot.installations import InstallationStore
from bot.settings import Settings
from bot.slack_notifier import SlackNotifier
from bot.slack_side import slack_client
from bot.token_rotation import refresher_for
from bot.workspaces import InstalledWorkspaces, SingleWorkspace
from store.db import Database
from store.models import utcnow

logger = logging.getLogger(__name__)


def operator() -> str:
    return f"cli:{getpass.getuser()}"


def _notifier(settings: Settings, db: Database) -> Notifier | None:
    """Announce in the escalation channel when Slack can be reached: with the one bot token,
    or installed by OAuth, with the tokens the workspaces' installs left in the database (the
    channel's workspace posts). The switch holds without it."""
    if settings.multi_workspace:
        assert settings.slack_client_id is not None
        key = settings.encryption_key()
        store = InstallationStore(client_id=settings.slack_client_id, engine=db.engine, key=key)
        refresher = None  # without the app's secret, tokens are used as the installs left them
        if settings.slack_client_secret is not None:
            refresher = refresher_for(settings, store, client=slack_client(settings))
        return SlackNotifier(
            InstalledWorkspaces(
                store,
                make_client=lambda token: slack_client(settings, token=token),
                refresher=refresher,
            )
        )
    if settings.slack_bot_token is None:
        return None
    return SlackNotifier(SingleWorkspace(slack_client(settings)))


def run_switch(settings: Settings, db: Database, *, pause: bool, reason: str | None) -> int:
    switch = KillSwitch(
        db=db,
        policy=load_policy(settings.policy_file),
        notifier=_notifier(settings, db),
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
