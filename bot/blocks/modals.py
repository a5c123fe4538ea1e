"""Modals. ``private_metadata`` holds an opaque action id only; submits are authorized again."""

from __future__ import annotations

from typing import Any

from bot.ids import BlockId, CallbackId, InputId
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
