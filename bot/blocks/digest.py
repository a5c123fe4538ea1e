"""The digest message: several approvals of one channel, one row each, with Approve / Reject.

One pure function renders every state, so a redraw after a decision is a re-render. Each row
is two blocks (a section, then the buttons while it is open), so a message of at most
``MAX_ITEMS`` rows stays within Slack's 50 blocks; the engine never lists more than that in one
digest, and rows beyond it are counted, never silently dropped.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from agent_runtime.views import ActionView, ApprovalView, DigestView
from bot.ids import ActionId, BlockId, choice_value
from bot.text import clip, mention, mrkdwn, verbatim

MAX_BLOCKS = 50
HEAD_BLOCKS = 2
MAX_ITEMS = (MAX_BLOCKS - HEAD_BLOCKS - 1) // 2
"""Rows that fit beside the header, the intro and a "more" line."""
SUMMARY_CHARS = 300
_CLOSED = {
    "resuming": "Decided, resuming the run",
    "expired": ":hourglass: Expired: rejected, nothing ran",
    "invalidated": "Invalidated: nothing ran",
    "failed": "Could not resume",
    "cancelled": "Cancelled: nothing ran",
}
_OUTCOMES = {
    "approved": ":white_check_mark: Approved",
    "rejected": ":x: Rejected",
    "expired": ":hourglass: Expired: rejected",
}
_VERBS = {"approve": "approved", "reject": "rejected"}


def digest_items(digest: DigestView) -> list[tuple[ApprovalView, ActionView]]:
    """Every action a person decides (or decided), request by request, in order."""
    return [(ap, ac) for ap in digest.approvals for ac in ap.actions if not ac.exempt]


def digest_message(digest: DigestView) -> dict[str, Any]:
    """``{"text": ..., "blocks": [...]}`` for chat.postMessage and chat.update."""
    items = digest_items(digest)
    waiting = sum(1 for ap, ac in items if _open(ap, ac))
    title = f"Approvals to review: {waiting} waiting" if waiting else "Approvals reviewed"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title}},
        _context(
            f"{len(items)} action(s) collected for review in a batch. Each button decides "
            "one action, at the version shown."
        ),
    ]
    for approval, action in items[:MAX_ITEMS]:
        blocks.append(_section(_row(approval, action)))
        if _open(approval, action):
            blocks.append(_buttons(action))
    hidden = len(items) - MAX_ITEMS
    if hidden > 0:
        blocks.append(_context(f"{hidden} more action(s) do not fit in this message."))
    return {"text": f"{waiting} approval(s) waiting for review", "blocks": blocks}


def _open(approval: ApprovalView, action: ActionView) -> bool:
    return approval.status == "pending" and action.outcome is None


def summary(args: dict[str, Any]) -> str:
    """``key=value, …`` on one line, cut short: enough to tell the items apart; the whole
    call is what the version (in the button) binds."""
    parts = []
    for key, value in args.items():
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
        parts.append(f"{key}={shown}")
    return ", ".join(parts)


def _row(approval: ApprovalView, action: ActionView) -> str:
    head = (
        f"{verbatim(action.tool_name, 200)}  ·  risk *{mrkdwn(action.risk, 20)}*  ·  "
        f"requested by {mention(approval.requester_id)}  ·  expires {_when(approval.expires_at)}"
    )
    args = verbatim(summary(action.args), SUMMARY_CHARS) if action.args else "(no arguments)"
    lines = [head, args, f"version `{mrkdwn(action.action_hash[:12], 12)}`"]
    status = _status(approval, action)
    if status:
        lines.append(status)
    return "\n".join(lines)


def _status(approval: ApprovalView, action: ActionView) -> str:
    """Who decided, and how it ended; nothing while it waits."""
    lines = []
    for decision in action.decisions[-3:]:
        verb = _VERBS.get(decision.type, mrkdwn(decision.type, 20))
        line = f"{mention(decision.reviewer_id)} {verb} at {_time(decision.at)}"
        if decision.message:
            line += f": {verbatim(decision.message, 300)}"
        lines.append(line)
    if action.outcome:
        lines.append(f"*{_OUTCOMES.get(action.outcome) or mrkdwn(action.outcome, 40)}*")
    elif approval.status != "pending":
        lines.append(f"*{_CLOSED.get(approval.status) or mrkdwn(approval.status, 40)}*")
    return "\n".join(lines)


def _buttons(action: ActionView) -> dict[str, Any]:
    """The value names the action and the version this row showed: a click on an older row
    is refused, as on cards. A row that cuts its arguments short offers all of them, as a card
    does: the version binds the whole call, so the reviewer must be able to read it."""
    value = choice_value(action.id, action.action_hash)
    elements = []
    if "approve" in action.allowed_decisions:
        elements.append(_button("Approve", ActionId.DIGEST_APPROVE, value, "primary"))
    if "reject" in action.allowed_decisions:
        elements.append(_button("Reject", ActionId.REJECT, value, "danger"))
    if _cut_short(action):
        elements.append(_button("View full arguments", ActionId.VIEW_ARGS, action.id, None))
    return {
        "type": "actions",
        "block_id": f"{BlockId.DIGEST_ROW_PREFIX}{action.id}",
        "elements": elements,
    }


def _cut_short(action: ActionView) -> bool:
    shown = summary(action.args)
    return bool(action.args) and verbatim(shown, SUMMARY_CHARS) != verbatim(shown, 1_000_000)


def _button(label: str, action_id: str, value: str, style: str | None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _when(at: dt.datetime) -> str:
    fallback = at.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def _time(at: dt.datetime) -> str:
    return f"<!date^{int(at.timestamp())}^{{time}}|{at.strftime('%H:%M UTC')}>"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000) or " "}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, 3000) or " "}]}
