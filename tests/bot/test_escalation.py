"""The escalation channel is one workspace's: a post there goes out with that workspace's
token, found among the installed workspaces (Slack refuses a channel of another one) and
remembered; with one bot token nothing changes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime.views import Reviewers
from bot.escalation import EscalationPoster
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.slack_notifier import SlackNotifier
from bot.workspaces import SingleWorkspace, WorkspaceNotInstalled
from store.switch import SwitchState
from tests.bot.test_blocks import RUN, approval

ACME, BETA, GAMMA = "T0SANDBOX", "T0BETA", "T0GAMMA"
BETA_ROOM, GAMMA_ROOM = "C0BETAROOM", "C0GAMMAROOM"
PAUSED = SwitchState(paused=True, reason="incident", changed_by="U0ADMIN")


@pytest.fixture
def sandbox() -> Iterator[SlackSandbox]:
    box = SlackSandbox().start()
    box.add_workspace(BETA, users={}, channels=(BETA_ROOM,))
    box.add_workspace(GAMMA, users={}, channels=(GAMMA_ROOM,))
    yield box
    box.stop()


class Installed:
    """Workspaces installed by OAuth, the earliest first (``installed``)."""

    def __init__(self, box: SlackSandbox, installed: list[str]) -> None:
        self.box = box
        self.installed = installed

    def client(self, team_id: str | None) -> WebClient:
        if team_id not in self.installed:
            raise WorkspaceNotInstalled(team_id)
        return WebClient(token=self.box.team_tokens[team_id], base_url=self.box.api_url)

    def url(self, team_id: str | None) -> str | None:
        return None

    def bot_user(self, team_id: str | None) -> str | None:
        return self.box.bot_users.get(team_id or "")

    def removed(self, team_id: str | None) -> None:
        return None

    def installed_teams(self) -> list[str]:
        return list(self.installed)


def posts(box: SlackSandbox) -> list[str]:
    """The team of each ``chat.postMessage`` call, refused or not, in order."""
    return [team for method, team in box.state.calls_by_team if method == "chat.postMessage"]


def test_the_channels_own_workspace_posts_whichever_workspace_asked(sandbox):
    notifier = SlackNotifier(Installed(sandbox, [ACME, BETA, GAMMA]))
    notifier.execution_switched(PAUSED, channel=GAMMA_ROOM, team_id=BETA)
    (announced,) = sandbox.state.top_level(GAMMA_ROOM)
    assert announced.team_id == GAMMA and "paused" in announced.text
    assert posts(sandbox) == [ACME, BETA, GAMMA], "the earlier installs are refused first"

    # Known from then on: the next announcement goes straight to it.
    notifier.execution_switched(SwitchState(paused=False), channel=GAMMA_ROOM, team_id=ACME)
    assert [m.team_id for m in sandbox.state.top_level(GAMMA_ROOM)] == [GAMMA, GAMMA]
    assert posts(sandbox) == [ACME, BETA, GAMMA, GAMMA]


def test_from_a_shell_the_earliest_install_is_tried_first(sandbox):
    poster = EscalationPoster(Installed(sandbox, [BETA, ACME]))
    poster.post(BETA_ROOM, asking=None, message={"text": "paused"})
    assert [m.team_id for m in sandbox.state.top_level(BETA_ROOM)] == [BETA]
    assert posts(sandbox) == [BETA]


def test_a_channel_no_installed_workspace_can_post_in_is_refused_with_slacks_answer(sandbox):
    poster = EscalationPoster(Installed(sandbox, [ACME, BETA]))
    with pytest.raises(SlackApiError) as refused:
        poster.post(GAMMA_ROOM, asking=BETA, message={"text": "paused"})
    assert refused.value.response["error"] == "channel_not_found"
    assert posts(sandbox) == [ACME, BETA]
    assert sandbox.state.top_level(GAMMA_ROOM) == []


def test_another_refusal_is_not_taken_for_another_workspace(sandbox):
    sandbox.failing["chat.postMessage"] = "ratelimited"
    poster = EscalationPoster(Installed(sandbox, [ACME, BETA]))
    with pytest.raises(SlackApiError):
        poster.post(BETA_ROOM, asking=BETA, message={"text": "paused"})
    assert posts(sandbox) == [ACME], "one try: the message may not be sent twice"


def test_with_one_bot_token_the_announcement_is_one_post_with_it(sandbox):
    client = WebClient(token=SANDBOX_TOKEN, base_url=sandbox.api_url)
    notifier = SlackNotifier(SingleWorkspace(client))
    notifier.execution_switched(PAUSED, channel="C0ESCALATE", team_id=None)
    notifier.execution_switched(PAUSED, channel="C0ESCALATE", team_id=ACME)
    assert [m.team_id for m in sandbox.state.top_level("C0ESCALATE")] == [ACME, ACME]
    assert posts(sandbox) == [ACME, ACME]


def test_a_reminders_copy_goes_to_the_escalation_channel_with_its_workspaces_token(sandbox):
    """The reminder itself stays in the run's workspace, under the card."""
    beta = WebClient(token=sandbox.team_tokens[BETA], base_url=sandbox.api_url)
    card = beta.chat_postMessage(channel=BETA_ROOM, text="card")
    run = replace(RUN, channel_id=BETA_ROOM, thread_ts=str(card["ts"]), team_id=BETA)
    waiting = approval(run=run, card_channel=BETA_ROOM, card_ts=str(card["ts"]))
    notifier = SlackNotifier(Installed(sandbox, [ACME, BETA, GAMMA]))
    notifier.approval_reminder(waiting, Reviewers(users=("U0BRAVI",), usergroups=()), GAMMA_ROOM)
    (reminder,) = sandbox.state.thread(BETA_ROOM, str(card["ts"]))
    assert reminder.team_id == BETA and reminder.text.startswith("Reminder:")
    (copied,) = sandbox.state.top_level(GAMMA_ROOM)
    assert copied.team_id == GAMMA and waiting.id in copied.text


class Revoked(Installed):
    """``revoked``'s token no longer works (revoked, or the account deactivated), while its
    rows are still in the store (the event saying so was never handled)."""

    def __init__(self, box: SlackSandbox, installed: list[str], *, revoked: str) -> None:
        super().__init__(box, installed)
        self.revoked = revoked

    def client(self, team_id: str | None) -> WebClient:
        if team_id == self.revoked:
            return WebClient(token="xoxb-revoked", base_url=self.box.api_url)
        return super().client(team_id)


def test_a_workspace_whose_token_slack_refuses_gives_way_to_the_next(sandbox):
    """Slack refused the token, so nothing was posted: the channel's own workspace still
    announces the switch."""
    notifier = SlackNotifier(Revoked(sandbox, [ACME, BETA], revoked=ACME))
    notifier.execution_switched(PAUSED, channel=BETA_ROOM, team_id=None)
    (announced,) = sandbox.state.top_level(BETA_ROOM)
    assert announced.team_id == BETA and "paused" in announced.text
