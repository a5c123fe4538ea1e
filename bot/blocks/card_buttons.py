"""The buttons of an approval card. Every value names the version it was drawn for, so a click
always says what the reviewer saw; bulk approval covers only actions the card shows."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import ActionView, ApprovalView, RunView, versions_digest
from bot.blocks.arguments import pretty
from bot.ids import ActionId, BlockId, choice_value
from bot.text import plain_text

KEY_CHARS = 24
VALUE_CHARS = 60


def action_buttons(
    approval: ApprovalView, action: ActionView, *, truncated: bool
) -> dict[str, Any] | None:
    elements: list[dict[str, Any]] = []
    if approval.status == "pending" and action.outcome is None:
        allowed = action.allowed_decisions
        choice = choice_value(action.id, action.action_hash)
        if "approve" in allowed:
            confirm = confirm_dialog(action) if action.risk == "high" else None
            elements.append(_button("Approve", ActionId.APPROVE, choice, "primary", confirm))
        if "edit" in allowed:
            elements.append(_button("Edit", ActionId.EDIT, choice))
        if "reject" in allowed:
            elements.append(_button("Reject", ActionId.REJECT, choice, "danger"))
        if "respond" in allowed:
            elements.append(_button("Respond", ActionId.RESPOND, choice))
    if truncated:
        elements.append(_button("View full arguments", ActionId.VIEW_ARGS, action.id))
    if not elements:
        return None
    return {
        "type": "actions",
        "block_id": f"{BlockId.ACTION_ROW_PREFIX}{action.id}",
        "elements": elements,
    }


def confirm_dialog(action: ActionView) -> dict[str, Any]:
    """Names exactly what is being approved. The bot's own words (tool, version, how many
    arguments) come first and whole; the agent's argument names and values follow, each cut
    short, so no argument can pose as the bot's question."""
    shown = action.edited_args if action.edited_args is not None else action.args
    count = f"{len(shown)} argument{'' if len(shown) == 1 else 's'}"
    own = f"Approve {action.tool_name}, version {action.action_hash[:12]}, with {count}?"
    summary = ", ".join(
        f"{_short(k, KEY_CHARS)}={_short(v, VALUE_CHARS)}" for k, v in shown.items()
    )
    return {
        "title": {"type": "plain_text", "text": "Approve a high-risk action?"},
        "text": plain_text(f"{own} Arguments: {summary}" if summary else own, 300),
        "confirm": {"type": "plain_text", "text": "Approve"},
        "deny": {"type": "plain_text", "text": "Cancel"},
        "style": "primary",
    }


def _short(value: Any, limit: int) -> str:
    text = pretty(value) if isinstance(value, dict | list) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def approve_all_row(approval: ApprovalView) -> dict[str, Any] | None:
    """Offered only for two or more approvable actions, all of them on this card; its value
    names their versions, so a changed card refuses it."""
    approvable = approval.approvable
    if len(approvable) < 2:
        return None
    value = choice_value(approval.id, versions_digest(approvable))
    element = _button("Approve all I may approve", ActionId.APPROVE_ALL, value, "primary")
    if any(a.risk == "high" for a in approvable):
        names = ", ".join(a.tool_name for a in approvable)
        element["confirm"] = {
            "title": {"type": "plain_text", "text": "Approve all?"},
            "text": plain_text(
                "Some of these actions are high risk. Approve every one you may approve, "
                f"as shown on the card: {names}?",
                300,
            ),
            "confirm": {"type": "plain_text", "text": "Approve all"},
            "deny": {"type": "plain_text", "text": "Cancel"},
        }
    return {
        "type": "actions",
        "block_id": f"{BlockId.REQUEST_ROW_PREFIX}{approval.id}",
        "elements": [element],
    }


def cancel_run_row(run: RunView, *, block_id: str) -> dict[str, Any] | None:
    """A Cancel button on a run's messages while the run is under way; its value is the run
    id only (who may cancel is decided on the server). ``block_id``: unique in the message."""
    if run.status not in ("running", "waiting"):
        return None
    element = _button("Cancel run", ActionId.CANCEL_RUN, run.id, "danger")
    element["confirm"] = {
        "title": {"type": "plain_text", "text": "Cancel this run?"},
        "text": plain_text(
            "The agent stops here: every approval of this run still open is closed and "
            "nothing more of it runs. This cannot be undone.",
            300,
        ),
        "confirm": {"type": "plain_text", "text": "Cancel run"},
        "deny": {"type": "plain_text", "text": "Keep it"},
        "style": "danger",
    }
    return {"type": "actions", "block_id": block_id, "elements": [element]}


def review_all_row(approval: ApprovalView) -> dict[str, Any]:
    element = _button(
        f"Review all {len(approval.actions)} actions", ActionId.REVIEW_ALL, approval.id
    )
    return {
        "type": "actions",
        "block_id": f"{BlockId.REQUEST_ROW_PREFIX}{approval.id}",
        "elements": [element],
    }


def _button(
    label: str, action_id: str, value: str, style: str | None = None, confirm: dict | None = None
) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    if confirm:
        button["confirm"] = confirm
    return button
