"""The engine's notifier, implemented with Slack: cards in the run's thread, updates, results."""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime.notifier import MessageRef
from agent_runtime.views import ApprovalView, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.messages import run_result_message

logger = logging.getLogger(__name__)
NO_UNFURL = {"unfurl_links": False, "unfurl_media": False}


class SlackNotifier:
    def __init__(self, client: WebClient) -> None:
        self.client = client

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        response = self.client.chat_postMessage(
            channel=approval.run.channel_id,
            thread_ts=approval.run.thread_ts,
            **approval_card(approval),
            **NO_UNFURL,
        )
        return MessageRef(channel=response["channel"], ts=response["ts"])

    def approval_updated(self, approval: ApprovalView) -> None:
        if not approval.card_channel or not approval.card_ts:
            return
        try:
            self.client.chat_update(
                channel=approval.card_channel, ts=approval.card_ts, **approval_card(approval)
            )
        except SlackApiError:
            # The decision is recorded; a stale card must not undo it. The next update repairs it.
            logger.exception("could not update the card of %s", approval.id)

    def run_finished(self, run: RunView) -> None:
        self.client.chat_postMessage(
            channel=run.channel_id, thread_ts=run.thread_ts, **run_result_message(run), **NO_UNFURL
        )
