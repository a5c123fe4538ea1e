"""Ephemeral notices that explain a refusal with more than one line of text."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import ActionView
from bot.blocks.arguments import edit_diff
from bot.text import clip, mention, verbatim


def stale_notice(action: ActionView, *, seen: str | None) -> dict[str, Any]:
    """A click on a version of the action that is no longer current: say what changed since,
    and that nothing was counted."""
    edits = [d for d in action.decisions if d.type == "edit"]
    if edits:
        last = edits[-1]
        who = f"{mention(last.reviewer_id)} edited its arguments"
        when = f" at <!date^{int(last.at.timestamp())}^{{time}}|{last.at:%H:%M UTC}>"
    else:
        who, when = "it changed", ""
    lines = [
        f"{verbatim(action.tool_name, 200)} *changed since you saw it:* {who}{when}. "
        "Your decision was not recorded. Review the card as it is now and decide again.",
        f"You saw version {verbatim((seen or 'unknown')[:12], 16)}; "
        f"the current version is `{action.action_hash[:12]}`.",
    ]
    blocks: list[dict[str, Any]] = [_section("\n".join(lines))]
    if action.edited_args is not None:
        blocks.append(
            _section("*Now (original → current)*\n" + edit_diff(action.args, action.edited_args))
        )
    text = f"{verbatim(action.tool_name, 200)} changed since you saw it"
    return {"text": text, "blocks": blocks}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000) or " "}}
