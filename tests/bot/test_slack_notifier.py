"""The Slack notifier's word to the engine on a result that can never be posted: a workspace
that removed the app has no token left to post with, in the thread or in a direct message."""

from __future__ import annotations

import dataclasses

import pytest
from slack_sdk import WebClient

from agent_runtime.errors import Undeliverable
from bot.slack_notifier import SlackNotifier
from bot.workspaces import SingleWorkspace, TokenNotRefreshed, WorkspaceNotInstalled
from tests.bot.test_blocks import RUN as BLOCKS_RUN

RUN = dataclasses.replace(BLOCKS_RUN, status="completed", result_text="sent", team_id="T0GONE")


class _Removed(SingleWorkspace):
    """A deployment whose workspace removed the app: no client for it any more."""

    def client(self, team_id: str | None):  # type: ignore[no-untyped-def]
        raise WorkspaceNotInstalled(team_id)


@pytest.mark.parametrize("tell", ["thread", "requester"])
def test_a_workspace_that_removed_the_app_is_never_posted_to_again(tell):
    notifier = SlackNotifier(_Removed(WebClient(token="xoxb-gone")))
    with pytest.raises(Undeliverable) as refused:
        if tell == "thread":
            notifier.run_finished(RUN)
        else:
            notifier.run_finished_directly(RUN, reason="is_archived")
    assert refused.value.reason == "workspace_not_installed"


class _NotRefreshed(SingleWorkspace):
    """A token whose refresh Slack refused just now, with ``error``."""

    error = "ratelimited"

    def client(self, team_id: str | None):  # type: ignore[no-untyped-def]
        raise TokenNotRefreshed(team_id or "", self.error)


def test_a_token_whose_refresh_failed_for_now_is_tried_again():
    notifier = SlackNotifier(_NotRefreshed(WebClient(token="xoxb-old")))
    with pytest.raises(TokenNotRefreshed):
        notifier.run_finished(RUN)


def test_a_token_whose_refresh_slack_refused_for_good_is_never_posted_with_again():
    """A revoked refresh token: nothing can be said there until the workspace installs the
    app again, as if it had removed it."""
    workspace = _NotRefreshed(WebClient(token="xoxb-old"))
    workspace.error = "invalid_refresh_token"
    with pytest.raises(Undeliverable) as refused:
        SlackNotifier(workspace).run_finished(RUN)
    assert refused.value.reason == "workspace_not_installed"
