"""The engine's notifier, implemented with Slack: cards (in the run's thread, or in the policy's
review channel with a line in the thread pointing at them), pings and direct messages to
reviewers, updates, results."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from slack_sdk import WebClient

from agent_runtime.errors import Undeliverable
from agent_runtime.notifier import MessageRef
from agent_runtime.reach import Reach
from agent_runtime.views import ApprovalView, DigestView, Reviewers, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.digest import digest_message
from bot.blocks.messages import (
    call_blocked_message,
    run_result_elsewhere_message,
    run_result_message,
    run_root_message,
)
from bot.blocks.pings import card_elsewhere, mentions, reviewer_dm, reviewers_ping
from bot.blocks.switch import switch_message
from bot.escalation import EscalationPoster
from bot.slack_refusals import final_refusals
from bot.tagged_messages import HISTORY_PAGES, card_tag, digest_tag, find_tagged, single_attempt
from bot.workspaces import Workspaces
from store.switch import SwitchState

logger = logging.getLogger(__name__)


class Unfurl(TypedDict):
    unfurl_links: bool
    unfurl_media: bool


NO_UNFURL = Unfurl(unfurl_links=False, unfurl_media=False)


class SlackNotifier:
    """Every message about a run goes through the client of the run's workspace (its
    ``team_id``); the escalation channel's through a client of the channel's workspace."""

    def __init__(self, workspaces: Workspaces) -> None:
        self.workspaces = workspaces
        self.escalation = EscalationPoster(workspaces)

    def _client(self, team_id: str | None) -> WebClient:
        return self.workspaces.client(team_id)

    def _card(self, approval: ApprovalView) -> dict[str, Any]:
        return approval_card(approval, workspace_url=self.workspaces.url(approval.run.team_id))

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        """Tagged with the request id, so ``find_card`` can tell it apart later. A card for a
        review channel goes there, top level, and the run's thread gets a line linking to it."""
        review = approval.review_channel if approval.away_from_run else None
        poster = single_attempt(self._client(approval.run.team_id))
        response = poster.chat_postMessage(
            channel=review or approval.run.channel_id,
            thread_ts=None if review else approval.run.thread_ts,
            metadata=card_tag(approval.id),
            **self._card(approval),
            **NO_UNFURL,
        )
        ref = MessageRef(channel=response["channel"], ts=response["ts"])
        if review:
            self._point_run_at(approval, ref)
        return ref

    def _point_run_at(self, approval: ApprovalView, card: MessageRef) -> None:
        """Not retried: the card itself links back to the run, and is what matters."""
        try:
            team = approval.run.team_id
            line = card_elsewhere(approval, channel=card.channel, link=self._permalink(team, card))
            self._client(team).chat_postMessage(
                channel=approval.run.channel_id,
                thread_ts=approval.run.thread_ts,
                **line,
                **NO_UNFURL,
            )
        except Exception:
            logger.exception("could not point the thread of %s at its card", approval.run.id)

    def _permalink(self, team_id: str | None, message: MessageRef) -> str | None:
        """Slack's own link (right for thread replies and Enterprise Grid), or None."""
        try:
            answer = self._client(team_id).chat_getPermalink(
                channel=message.channel, message_ts=message.ts
            )
        except Exception:
            logger.warning("no permalink for %s in %s", message.ts, message.channel)
            return None
        link = answer.get("permalink")
        return link if isinstance(link, str) else None

    def find_card(self, approval: ApprovalView) -> MessageRef | None:
        """Our message whose metadata names this request, where the card is posted: the run's
        thread (``conversations.replies``), or the newest messages of the review channel
        (``conversations.history``); needs ``channels:history`` / ``groups:history``."""
        team = approval.run.team_id
        client, tag = self._client(team), card_tag(approval.id)
        if approval.away_from_run and approval.review_channel:
            channel = approval.review_channel
            return find_tagged(
                lambda c: client.conversations_history(
                    channel=channel, include_all_metadata=True, limit=200, cursor=c
                ),
                channel=channel,
                author=self.workspaces.bot_user(team),
                tag=tag,
                pages=HISTORY_PAGES,
            )
        channel, thread = approval.run.channel_id, approval.run.thread_ts
        if not thread:
            return None
        return find_tagged(
            lambda c: client.conversations_replies(
                channel=channel, ts=thread, include_all_metadata=True, limit=200, cursor=c
            ),
            channel=channel,
            author=self.workspaces.bot_user(team),
            tag=tag,
        )

    def approval_updated(self, approval: ApprovalView) -> None:
        if not approval.card_channel or not approval.card_ts:
            return
        self._client(approval.run.team_id).chat_update(
            channel=approval.card_channel, ts=approval.card_ts, **self._card(approval)
        )

    def digest_posted(self, digest: DigestView) -> MessageRef | None:
        """Top level in the channel, tagged with the digest id for ``find_digest``; one
        attempt only (the engine looks for it before posting again)."""
        poster = single_attempt(self._client(digest.team_id))
        response = poster.chat_postMessage(
            channel=digest.channel,
            metadata=digest_tag(digest.id),
            **digest_message(digest),
            **NO_UNFURL,
        )
        return MessageRef(channel=response["channel"], ts=response["ts"])

    def digest_updated(self, digest: DigestView) -> None:
        if digest.ts is None:
            return
        self._client(digest.team_id).chat_update(
            channel=digest.channel, ts=digest.ts, **digest_message(digest)
        )

    def find_digest(self, digest: DigestView) -> MessageRef | None:
        """Our newest messages in the digest's channel (``conversations.history``)."""
        client = self._client(digest.team_id)
        return find_tagged(
            lambda c: client.conversations_history(
                channel=digest.channel, include_all_metadata=True, limit=200, cursor=c
            ),
            channel=digest.channel,
            author=self.workspaces.bot_user(digest.team_id),
            tag=digest_tag(digest.id),
            pages=HISTORY_PAGES,
        )

    def run_finished(self, run: RunView) -> None:
        """``Undeliverable`` when the thread will never take it (``final_refusals``). The
        first message loses its Cancel button then too (not at every retry of a failure that
        may pass): the run has ended."""
        try:
            with final_refusals():
                self._client(run.team_id).chat_postMessage(
                    channel=run.channel_id,
                    thread_ts=run.thread_ts,
                    **run_result_message(run),
                    **NO_UNFURL,
                )
        except Undeliverable:
            self._redraw_root(run)
            raise
        self._redraw_root(run)

    def run_finished_directly(self, run: RunView, *, reason: str) -> None:
        """``Undeliverable`` when the requester can never be written to by the app."""
        with final_refusals(direct=True):
            client = self._client(run.team_id)
            opened = client.conversations_open(users=run.requester_id)
            message = run_result_elsewhere_message(run, reason=reason)
            client.chat_postMessage(channel=opened["channel"]["id"], **message, **NO_UNFURL)

    def _redraw_root(self, run: RunView) -> None:
        """The run's first message loses its Cancel button once the run ended. Best effort:
        a stale button only earns a "this run already ended" answer."""
        if not run.thread_ts:
            return
        try:
            self._client(run.team_id).chat_update(
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

    def reviewers_needed(self, approval: ApprovalView, reach: Reach, *, after: str | None) -> None:
        """A reply under the card (a mention in a new message notifies; a mention added by
        redrawing the card would not), and a direct message to each reviewer who asked for
        one, linking to the card. One failed direct message does not stop the others."""
        if approval.card_channel is None or approval.card_ts is None:
            return
        channel, thread = _card_place(approval)
        team = approval.run.team_id
        client = self._client(team)
        if mentions(reach.mention):
            client.chat_postMessage(
                channel=channel,
                thread_ts=thread,
                **reviewers_ping(approval, reach.mention, after=after),
                **NO_UNFURL,
            )
        if not reach.direct:
            return
        link = self._permalink(team, MessageRef(channel=approval.card_channel, ts=approval.card_ts))
        message = reviewer_dm(approval, link=link, after=after)
        for user in reach.direct:
            try:
                opened = client.conversations_open(users=user)
                client.chat_postMessage(channel=opened["channel"]["id"], **message, **NO_UNFURL)
            except Exception:
                logger.exception("could not send %s a direct message about %s", user, approval.id)

    def approval_reminder(
        self, approval: ApprovalView, reviewers: Reviewers, escalation_channel: str | None
    ) -> None:
        """Where the card is: a card in a review channel is reminded of there, in its thread.
        The escalation channel's copy goes out with a token of that channel's workspace."""
        who = mentions(reviewers) or "the approvers"
        channel, thread = _card_place(approval)
        self._client(approval.run.team_id).chat_postMessage(
            channel=channel,
            thread_ts=thread,
            text=f"Reminder: {who}, approval {approval.id} is still waiting for you.",
            **NO_UNFURL,
        )
        if escalation_channel:
            text = (
                f"Approval {approval.id} in <#{approval.run.channel_id}> is still waiting "
                f"(expires {approval.expires_at:%Y-%m-%d %H:%M} UTC). Reviewers: {who}"
            )
            self.escalation.post(
                escalation_channel,
                asking=approval.run.team_id,
                message={"text": text, **NO_UNFURL},
            )

    def call_blocked(self, run: RunView, *, tool_name: str, reason: str) -> None:
        self._client(run.team_id).chat_postMessage(
            channel=run.channel_id,
            thread_ts=run.thread_ts,
            **call_blocked_message(tool_name=tool_name, reason=reason),
            **NO_UNFURL,
        )

    def execution_switched(self, state: SwitchState, *, channel: str, team_id: str | None) -> None:
        """The switch is one for every workspace: the channel's own workspace posts, whichever
        workspace (``team_id``, None from a shell) flipped it."""
        self.escalation.post(
            channel, asking=team_id, message={**switch_message(state), **NO_UNFURL}
        )

    def _thread(self, approval: ApprovalView, text: str) -> None:
        self._client(approval.run.team_id).chat_postMessage(
            channel=approval.run.channel_id,
            thread_ts=approval.run.thread_ts,
            text=text,
            **NO_UNFURL,
        )


def _card_place(approval: ApprovalView) -> tuple[str, str | None]:
    """Channel and thread where messages about a card go: the run's thread for a card in it,
    the card's own thread for one in a review channel (or before the card is known, the run's)."""
    run = approval.run
    if approval.card_channel is None or approval.card_ts is None:
        return run.channel_id, run.thread_ts
    if approval.card_channel == run.channel_id and run.thread_ts:
        return run.channel_id, run.thread_ts
    return approval.card_channel, approval.card_ts
