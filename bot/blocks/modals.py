"""Modals. ``private_metadata`` holds an opaque action id only; submits are authorized again."""

from __future__ import annotations

from typing import Any

from bot.ids import ActionId, BlockId, CallbackId, InputId
from bot.text import plain_text


def _text_modal(
    *,
    callback_id: str,
    action_id: str,
    title: str,
    submit: str,
    prompt: str,
    block_id: str,
    input_id: str,
    label: str,
    max_length: int,
) -> dict[str, Any]:
    """A modal asking for one required text: a reject reason or an answer."""
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": action_id,
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {"type": "section", "text": plain_text(prompt, 3000)},
            {
                "type": "input",
                "block_id": block_id,
                "label": {"type": "plain_text", "text": label},
                "element": {
                    "type": "plain_text_input",
                    "action_id": input_id,
                    "multiline": True,
                    "min_length": 1,
                    "max_length": max_length,
                },
            },
        ],
    }


def _text_value(view: dict[str, Any], block_id: str, input_id: str) -> str:
    values = view.get("state", {}).get("values", {})
    return str(values.get(block_id, {}).get(input_id, {}).get("value") or "").strip()


def reject_modal(*, action_id: str, tool_name: str) -> dict[str, Any]:
    return _text_modal(
        callback_id=CallbackId.REJECT_MODAL,
        action_id=action_id,
        title="Reject action",
        submit="Reject",
        prompt=f"Reject {tool_name}?",
        block_id=BlockId.REJECT_REASON,
        input_id=InputId.REASON,
        label="Reason (the agent and the thread see it)",
        max_length=2000,
    )


def reject_reason(view: dict[str, Any]) -> str:
    return _text_value(view, BlockId.REJECT_REASON, InputId.REASON)


def respond_modal(*, action_id: str, tool_name: str, question: str) -> dict[str, Any]:
    return _text_modal(
        callback_id=CallbackId.RESPOND_MODAL,
        action_id=action_id,
        title="Answer the agent",
        submit="Send answer",
        prompt=f"{tool_name}: {question}",
        block_id=BlockId.RESPOND_ANSWER,
        input_id=InputId.ANSWER,
        label="Your answer (the agent gets it as is)",
        max_length=3000,
    )


def respond_answer(view: dict[str, Any]) -> str:
    return _text_value(view, BlockId.RESPOND_ANSWER, InputId.ANSWER)


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


def notice_modal(*, title: str, text: str) -> dict[str, Any]:
    """A modal that only says something (our own text), e.g. pushed over a form to keep it."""
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": title[:24]},
        "close": {"type": "plain_text", "text": "OK"},
        "blocks": [{"type": "section", "text": {"type": "plain_text", "text": text}}],
    }
