"""Messages that reach reviewers: the ping where the card is, a direct message linking to the
card, and the line in the run's thread pointing at a card posted in a review channel.

Built from ids only (the policy's user and group ids, our approval ids, channel ids, Slack's
permalinks): no tool name, argument or other agent text goes into them, so every mention in
them is one the bot meant.
"""

from __future__ import annotations

import re
from typing import Any

from agent_runtime.reach import GROUP_ID, USER_ID
from agent_runtime.views import ApprovalView, Reviewers
from bot.text import mrkdwn

_CHANNEL = re.compile(r"^[CGD][A-Z0-9]{1,20}$")
_LINK = re.compile(r"^https?://[^\s|<>]+$")


def mentions(reviewers: Reviewers) -> str:
    """``<@U…>`` and ``<!subteam^S…>`` for well-formed ids; anything else is left out."""
    parts = [f"<@{u}>" for u in reviewers.users if USER_ID.match(u)]
    parts += [f"<!subteam^{g}>" for g in reviewers.usergroups if GROUP_ID.match(g)]
    return " ".join(parts)


def channel_ref(channel_id: str) -> str:
    return f"<#{channel_id}>" if _CHANNEL.match(channel_id) else mrkdwn(channel_id, 40)


def card_link(link: str | None, label: str = "open the card") -> str:
    """A permalink Slack gave us, if it looks like one; else nothing."""
    return f"<{link}|{label}>" if link and _LINK.match(link) else ""


def reviewers_ping(
    approval: ApprovalView, reviewers: Reviewers, *, after: str | None
) -> dict[str, Any]:
    """Posted under the card: mentions notify, where a later card redraw would not. Who signed
    off is on the card; naming them here would ping them too."""
    who, approval_id = mentions(reviewers), mrkdwn(approval.id, 64)
    if after:
        text = f"{who}: approval {approval_id} has a sign-off and needs another; you can give it."
    else:
        text = f"{who}: approval {approval_id} needs your review."
    return _message(text)


def reviewer_dm(approval: ApprovalView, *, link: str | None, after: str | None) -> dict[str, Any]:
    """A direct message to one reviewer: where the card is and a link to it."""
    where = channel_ref(approval.card_channel) if approval.card_channel else "Slack"
    opened = card_link(link)
    tail = f": {opened}" if opened else "."
    approval_id = mrkdwn(approval.id, 64)
    if after:
        text = (
            f"Approval {approval_id} in {where} has a sign-off and needs another, which you "
            f"can give{tail}"
        )
    else:
        text = f"Approval {approval_id} in {where} needs your review{tail}"
    return _message(text)


def card_elsewhere(approval: ApprovalView, *, channel: str, link: str | None) -> dict[str, Any]:
    """In the run's thread, for a card the policy sends to a review channel."""
    opened = card_link(link, "see the card")
    tail = f": {opened}" if opened else "."
    return _message(
        f"Approval {mrkdwn(approval.id, 64)} is waiting for review in {channel_ref(channel)}{tail}"
    )


def _message(text: str) -> dict[str, Any]:
    """A section holds 3000 characters: a longer list of mentions goes as text only, whole (a
    cut mention would name nobody, or somebody else)."""
    if len(text) > 3000:
        return {"text": text}
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
