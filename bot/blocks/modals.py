"""Modals. ``private_metadata`` holds an opaque action id only; submits are authorized again."""

from __future__ import annotations

from typing import Any

from bot.ids import ActionId, BlockId, CallbackId, InputId
from bot.text import plain


def reject_modal(*, action_id: str, tool_name: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": CallbackId.REJECT_MODAL,
        "private_metadata": action_id,
        "title": {"type": "plain_text", "text": "Reject action"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {"type": "plain_text", "text": plain(f"Reject {tool_name}?", 3000)},
            },
            {
                "type": "input",
                "block_id": BlockId.REJECT_REASON,
                "label": {"type": "plain_text", "text": "Reason (the agent and the thread see it)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": InputId.REASON,
                    "multiline": True,
                    "min_length": 1,
                    "max_length": 2000,
                },
            },
        ],
    }


def reject_reason(view: dict[str, Any]) -> str:
    values = view.get("state", {}).get("values", {})
    field = values.get(BlockId.REJECT_REASON, {}).get(InputId.REASON, {})
    return str(field.get("value") or "").strip()


def respond_modal(*, action_id: str, tool_name: str, question: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": CallbackId.RESPOND_MODAL,
        "private_metadata": action_id,
        "title": {"type": "plain_text", "text": "Answer the agent"},
        "submit": {"type": "plain_text", "text": "Send answer"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {"type": "plain_text", "text": plain(f"{tool_name}: {question}", 3000)},
            },
            {
                "type": "input",
                "block_id": BlockId.RESPOND_ANSWER,
                "label": {"type": "plain_text", "text": "Your answer (the agent gets it as is)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": InputId.ANSWER,
                    "multiline": True,
                    "min_length": 1,
                    "max_length": 3000,
                },
            },
        ],
    }


def respond_answer(view: dict[str, Any]) -> str:
    values = view.get("state", {}).get("values", {})
    return str(values.get(BlockId.RESPOND_ANSWER, {}).get(InputId.ANSWER, {}).get("value") or "")


def arguments_modal(
    *, action_id: str, pages: list[list[dict[str, Any]]], page: int
) -> dict[str, Any]:
    """One page of the full arguments; ``private_metadata`` is the action id only."""
    page = max(0, min(page, len(pages) - 1))
    blocks = list(pages[page])
    if len(pages) > 1:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "plain_text", "text": f"Page {page + 1} of {len(pages)}"}],
            }
        )
        nav = []
        if page > 0:
            nav.append(_page_button("Previous page", action_id, page - 1))
        if page < len(pages) - 1:
            nav.append(_page_button("Next page", action_id, page + 1))
        blocks.append({"type": "actions", "elements": nav})
    return {
        "type": "modal",
        "callback_id": CallbackId.ARGS_MODAL,
        "private_metadata": action_id,
        "title": {"type": "plain_text", "text": "Full arguments"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": blocks,
    }


def _page_button(label: str, action_id: str, page: int) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": ActionId.VIEW_ARGS_PAGE,
        "value": f"{action_id}:{page}",
    }
