"""Tool arguments, readable: short scalars as fields, the rest as JSON, long values cut with a way
to see everything (a paged modal)."""

from __future__ import annotations

import difflib
import json
from typing import Any

from bot.text import code_block, code_chunks, plain_text, verbatim

FIELD_VALUE_LIMIT = 200
MAX_FIELDS = 10
CARD_JSON_LIMIT = 1800
PAGE_CHARS = 2800
BLOCKS_PER_PAGE = 40


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return None


def args_markup(args: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]], bool]:
    """(code block or None, section fields, whether anything was cut short)."""
    scalars = {k: _scalar_text(v) for k, v in args.items()}
    if args and len(args) <= MAX_FIELDS and all(v is not None for v in scalars.values()):
        fields = []
        truncated = False
        for key, text in scalars.items():
            assert text is not None
            truncated |= len(text) > FIELD_VALUE_LIMIT or len(key) > 100
            fields.append(
                {
                    "type": "mrkdwn",
                    "text": f"*{verbatim(key, 100)}*\n{verbatim(text, FIELD_VALUE_LIMIT)}",
                }
            )
        return None, fields, truncated
    body = pretty(args)
    return code_block(body, CARD_JSON_LIMIT), [], len(body) > CARD_JSON_LIMIT - 20


def full_argument_pages(
    *, tool_name: str, args: dict[str, Any], preview: str | None
) -> list[list[dict[str, Any]]]:
    """Every argument and the preview, split into pages of modal blocks within Slack's limits."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": plain_text(f"Tool: {tool_name}", 3000)}
    ]
    for chunk in code_chunks(pretty(args), PAGE_CHARS):
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": chunk}})
    if preview:
        blocks.append({"type": "header", "text": {"type": "plain_text", "text": "Preview"}})
        for chunk in code_chunks(preview, PAGE_CHARS):
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": chunk}})
    return [blocks[i : i + BLOCKS_PER_PAGE] for i in range(0, len(blocks), BLOCKS_PER_PAGE)]


def edit_diff(before: dict[str, Any], after: dict[str, Any] | None) -> str:
    """The lines an edit changed, as a code block (before → after)."""
    lines = [
        line
        for line in difflib.unified_diff(
            pretty(before).splitlines(), pretty(after or {}).splitlines(), lineterm="", n=1
        )
        if not line.startswith(("---", "+++", "@@"))
    ]
    return code_block("\n".join(lines) or "(no change)", 2600)
