"""Render sandbox messages as text, roughly as a person would read them in Slack."""

from __future__ import annotations

import html
import re
from typing import Any

from bot.sandbox.state import Ephemeral, Message

_MENTION = re.compile(r"<@([A-Z0-9]+)>")
_DATE = re.compile(r"<!date\^[^|>]*\|([^>]*)>")
_GROUP = re.compile(r"<!subteam\^([A-Z0-9]+)>")
_CHANNEL = re.compile(r"<#([A-Z0-9]+)>")
_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]*)>")


def mrkdwn_to_text(text: str, users: dict[str, str]) -> str:
    text = _MENTION.sub(lambda m: "@" + users.get(m.group(1), m.group(1)), text)
    text = _DATE.sub(lambda m: m.group(1), text)
    text = _GROUP.sub(lambda m: "@group:" + m.group(1), text)
    text = _CHANNEL.sub(lambda m: "#" + m.group(1), text)
    text = _LINK.sub(lambda m: f"{m.group(2)} [{m.group(1)}]", text)
    return html.unescape(text)


def _block_lines(block: dict[str, Any], users: dict[str, str]) -> list[str]:
    kind = block.get("type")
    if kind == "header":
        return [f"== {block['text']['text']} =="]
    if kind == "section":
        return mrkdwn_to_text(block["text"]["text"], users).splitlines()
    if kind == "context":
        return ["  " + mrkdwn_to_text(e.get("text", ""), users) for e in block.get("elements", [])]
    if kind == "actions":
        labels = [f"[{e['text']['text']}]" for e in block.get("elements", []) if "text" in e]
        return ["  " + " ".join(labels)]
    if kind == "divider":
        return ["  ----"]
    return []


def render_message(message: Message | Ephemeral, users: dict[str, str]) -> str:
    lines: list[str] = []
    for block in message.blocks:
        lines.extend(_block_lines(block, users))
    if not lines:
        lines = mrkdwn_to_text(message.text, users).splitlines()
    return "\n".join(lines)


def render_view(view: dict[str, Any], users: dict[str, str]) -> str:
    """A modal or a Home tab, block by block."""
    lines: list[str] = []
    for block in view.get("blocks", []):
        lines.extend(_block_lines(block, users))
    return "\n".join(lines)


def indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())
