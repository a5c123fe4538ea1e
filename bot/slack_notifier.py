"""The engine's notifier, implemented with Slack: cards in the run's thread, updates, results."""

from __future__ import annotations

import logging
import re
from typing import TypedDict

from slack_sdk import WebClient

from agent_runtime.notifier import MessageRef
from agent_runtime.views import ApprovalView, Reviewers, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.messages import call_blocked_message, run_result_message
from bot.text import mention

logger = logging.getLogger(__name__)
_GROUP_ID = re.compile(r"^S[A-Z0-9]{2,20}$")


class Unfurl(TypedDict):
    unfurl_links: bool
    unfurl_media: bool


NO_UNFURL = Unfurl(unfurl_links=False, unfurl_media=False)


class SlackNotifier:
    def __init__(self, client: WebClient, *, workspace_url: str | None = None) -> None:
        self.client = client
        self.workspace_url = workspace_url

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        response = self.client.chat_postMessage(
            channel=approval.run.channel_id,
            thread_ts=approval.run.thread_ts,
            **approval_card(approval, workspace_url=self.workspace_url),
            **NO_UNFURL,
        )
        return MessageRef(channel=response["channel"], ts=response["ts"])

    def approval_updated(self, approval: ApprovalView) -> None:
        if not approval.card_channel or not approval.card_ts:
            return
        self.client.chat_update(
            channel=approval.card_channel,
            ts=approval.card_ts,
            **approval_card(approval, workspace_url=self.workspace_url),
        )

    def run_finished(self, run: RunView) -> None:
        self.client.chat_postMessage(
            channel=run.channel_id, thread_ts=run.thread_ts, **run_result_message(run), **NO_UNFURL
        )

    def approval_expired(self, approval: ApprovalView) -> None:
        self._thread(
            approval,
            f"Nobody decided on approval {approval.id} before it expired, so its actions were "
            "rejected and did not run.",
        )

    def approval_reminder(
        self, approval: ApprovalView, reviewers: Reviewers, escalation_channel: str | None
    ) -> None:
        who = _reviewer_mentions(reviewers)
        self._thread(approval, f"Reminder: {who}, approval {approval.id} is still waiting for you.")
        if escalation_channel:
            self.client.chat_postMessage(
                channel=escalation_channel,
                text=(
                    f"Approval {approval.id} in <#{approval.run.channel_id}> is still waiting "
                    f"(expires {approval.expires_at:%Y-%m-%d %H:%M} UTC). Reviewers: {who}"
                ),
                **NO_UNFURL,
            )

    def call_blocked(self, run: RunView, *, tool_name: str, reason: str) -> None:
        self.client.chat_postMessage(
            channel=run.channel_id,
            thread_ts=run.thread_ts,
            **call_blocked_message(tool_name=tool_name, reason=reason),
            **NO_UNFURL,
        )

    def _thread(self, approval: ApprovalView, text: str) -> None:
        self.client.chat_postMessage(
            channel=approval.run.channel_id,
            thread_ts=approval.run.thread_ts,
            text=text,
            **NO_UNFURL,
        )


def _reviewer_mentions(reviewers: Reviewers) -> str:
    """Mentions we build from policy ids, never from agent text."""
    parts = [mention(u) for u in reviewers.users]
    parts += [f"<!subteam^{g}>" for g in reviewers.usergroups if _GROUP_ID.match(g)]
    return " ".join(parts) or "the approvers"
