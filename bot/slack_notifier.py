"""The engine's notifier, implemented with Slack: cards in the run's thread, updates, results."""

from __future__ import annotations

import logging
import re
from typing import TypedDict

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from agent_runtime.notifier import MessageRef
from agent_runtime.views import ApprovalView, Reviewers, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.messages import call_blocked_message, run_result_message, run_root_message
from bot.text import mention

logger = logging.getLogger(__name__)
_GROUP_ID = re.compile(r"^S[A-Z0-9]{2,20}$")


class Unfurl(TypedDict):
    unfurl_links: bool
    unfurl_media: bool


NO_UNFURL = Unfurl(unfurl_links=False, unfurl_media=False)
CARD_EVENT = "approval_card"
"""Message metadata ``event_type`` of our cards; ``event_payload.request_id`` names the request."""


class SlackNotifier:
    def __init__(self, client: WebClient, *, workspace_url: str | None = None) -> None:
        self.client = client
        self.workspace_url = workspace_url
        self._card_poster = _single_attempt(client)
        self._bot_user: str | None = None

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        """Tagged with the request id, so ``find_card`` can tell it apart later."""
        response = self._card_poster.chat_postMessage(
            channel=approval.run.channel_id,
            thread_ts=approval.run.thread_ts,
            metadata={"event_type": CARD_EVENT, "event_payload": {"request_id": approval.id}},
            **approval_card(approval, workspace_url=self.workspace_url),
            **NO_UNFURL,
        )
        return MessageRef(channel=response["channel"], ts=response["ts"])

    def find_card(self, approval: ApprovalView) -> MessageRef | None:
        """Our message in the run's thread whose metadata names this request (needs the
        ``channels:history`` / ``groups:history`` scopes). Cards are always posted in the run's
        thread: without one there is nothing to look through."""
        channel, thread = approval.run.channel_id, approval.run.thread_ts
        if not thread:
            return None
        me = self._me()
        cursor = None
        while True:
            page = self.client.conversations_replies(
                channel=channel, ts=thread, include_all_metadata=True, limit=200, cursor=cursor
            )
            for message in page.get("messages") or []:
                meta = message.get("metadata") or {}
                if (
                    message.get("user") == me
                    and meta.get("event_type") == CARD_EVENT
                    and (meta.get("event_payload") or {}).get("request_id") == approval.id
                ):
                    return MessageRef(channel=channel, ts=str(message["ts"]))
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None

    def _me(self) -> str | None:
        """The bot's own user id: only its messages can be its cards."""
        if self._bot_user is None:
            self._bot_user = self.client.auth_test().get("user_id")
        return self._bot_user

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
        self._redraw_root(run)

    def _redraw_root(self, run: RunView) -> None:
        """The run's first message loses its Cancel button once the run ended. Best effort:
        a stale button only earns a "this run already ended" answer."""
        if not run.thread_ts:
            return
        try:
            self.client.chat_update(
                channel=run.channel_id, ts=run.thread_ts, **run_root_message(run)
            )
        except Exception:
            logger.warning("could not redraw the first message of %s", run.id, exc_info=True)

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


def _single_attempt(client: WebClient) -> WebClient:
    """``client`` without the retry after a dropped connection: a post that Slack may already
    have taken is not sent twice. The reconciler retries it, after looking for it first."""
    return WebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        ssl=client.ssl,
        proxy=client.proxy,
        headers=client.headers,
        retry_handlers=[
            h for h in client.retry_handlers if not isinstance(h, ConnectionErrorRetryHandler)
        ],
    )


def _reviewer_mentions(reviewers: Reviewers) -> str:
    """Mentions we build from policy ids, never from agent text."""
    parts = [mention(u) for u in reviewers.users]
    parts += [f"<!subteam^{g}>" for g in reviewers.usergroups if _GROUP_ID.match(g)]
    return " ".join(parts) or "the approvers"
