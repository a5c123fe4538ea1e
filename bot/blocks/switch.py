"""The escalation channel's line when an admin pauses or resumes all gated execution."""

from __future__ import annotations

from typing import Any

from bot.ids import APPROVALS_COMMAND
from bot.text import mention, verbatim
from store.switch import SwitchState


def who(changed_by: str | None) -> str:
    """A Slack user as a mention; an operator at the command line by name, escaped."""
    return mention(changed_by[:100]) if changed_by else "an operator"


def switch_message(state: SwitchState) -> dict[str, Any]:
    if state.paused:
        why = f" Reason: {verbatim(state.reason, 500)}" if state.reason else ""
        text = (
            f":octagonal_sign: *Gated execution paused* by {who(state.changed_by)}. No gated "
            f"tool runs and no card can be approved until an admin runs "
            f"`{APPROVALS_COMMAND} resume`.{why}"
        )
        plain = f"Gated execution paused by {who(state.changed_by)}"
    else:
        text = (
            f":arrow_forward: *Gated execution resumed* by {who(state.changed_by)}. Cards can "
            "be approved again, and approved actions run."
        )
        plain = f"Gated execution resumed by {who(state.changed_by)}"
    return {
        "text": plain,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }
