"""The "Review all actions" modal: every action of a batch too large for its card, page by page,
each with its own Approve and Reject. Nothing is approved that was not drawn here or on the card."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import ActionView, ApprovalView
from bot.blocks.arguments import args_markup
from bot.blocks.card_buttons import confirm_dialog
from bot.ids import ActionId, CallbackId, choice_value
from bot.text import clip, mrkdwn, verbatim

PAGE_SIZE = 5
_OUTCOMES = {
    "approved": "Approved",
    "edited": "Approved with edits",
    "rejected": "Rejected",
    "responded": "Answered",
    "expired": "Expired: rejected",
}


def page_count(approval: ApprovalView) -> int:
    return max(1, -(-len(approval.actions) // PAGE_SIZE))


def review_modal(approval: ApprovalView, *, page: int) -> dict[str, Any]:
    """``private_metadata`` is ``<approval id>:<page>``: opaque, authorized again on click."""
    pages = page_count(approval)
    page = max(0, min(page, pages - 1))
    chunk = approval.actions[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
    blocks: list[dict[str, Any]] = []
    for action in chunk:
        blocks += _action_rows(approval, action)
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "plain_text",
                    "text": f"Page {page + 1} of {pages} · {len(approval.actions)} actions",
                }
            ],
        }
    )
    nav = []
    if page > 0:
        nav.append(_nav("Previous page", approval.id, page - 1))
    if page < pages - 1:
        nav.append(_nav("Next page", approval.id, page + 1))
    if nav:
        blocks.append({"type": "actions", "block_id": "review_nav", "elements": nav})
    return {
        "type": "modal",
        "callback_id": CallbackId.REVIEW_MODAL,
        "private_metadata": f"{approval.id}:{page}",
        "title": {"type": "plain_text", "text": "Review all actions"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": blocks,
    }


def _action_rows(approval: ApprovalView, action: ActionView) -> list[dict[str, Any]]:
    shown = action.edited_args if action.edited_args is not None else action.args
    code, fields, cut = args_markup(shown)
    cut |= bool((action.extra or {}).get("preview"))
    head = (
        f"*{action.position + 1}.* {verbatim(action.tool_name, 200)}  ·  "
        f"risk *{mrkdwn(action.risk, 20)}*"
    )
    section: dict[str, Any] = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": clip(head + (f"\n{code}" if code else ""), 3000)},
    }
    if fields:
        section["fields"] = fields
    rows: list[dict[str, Any]] = [{"type": "divider"}, section]
    if action.outcome is not None:
        status = _OUTCOMES.get(action.outcome, action.outcome)
        rows.append(_context(f"{status}"))
        return rows
    signed = len(action.approvers)
    rows.append(_context(f"Sign-offs: {signed} of {action.approvals_required}"))
    if approval.status == "pending":
        buttons = _buttons(action)
        if cut:  # what did not fit here is one click away, as on the card
            buttons.append(_plain_button("View full arguments", ActionId.VIEW_ARGS, action.id))
        if buttons:
            rows.append({"type": "actions", "block_id": f"review:{action.id}", "elements": buttons})
    return rows


def _buttons(action: ActionView) -> list[dict[str, Any]]:
    choice = choice_value(action.id, action.action_hash)
    buttons = []
    if "approve" in action.allowed_decisions:
        approve: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": "Approve"},
            "action_id": ActionId.APPROVE,
            "value": choice,
            "style": "primary",
        }
        if action.risk == "high":
            approve["confirm"] = confirm_dialog(action)
        buttons.append(approve)
    if "reject" in action.allowed_decisions:
        buttons.append(
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Reject"},
                "action_id": ActionId.REJECT,
                "value": choice,
                "style": "danger",
            }
        )
    return buttons


def _plain_button(label: str, action_id: str, value: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
    }


def _nav(label: str, approval_id: str, page: int) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": ActionId.REVIEW_PAGE,
        "value": f"{approval_id}:{page}",
    }


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(text, 3000)}]}
