"""A small model of what Slack would format in what the bot sends, for tests that check agent
text stays literal: Slack formats nothing inside code, so code spans are blanked first and the
rest is searched for bold, italic, strike, quotes and emoji shortcodes."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

CODE = re.compile(r"```[^`]*```|`[^`]*`")
_DATE = re.compile(r"<!date\^\d+\^[^|>]*\|[^>]*>")
FORMATTING = re.compile(
    r"\*[^*\n]+\*"
    r"|(?<![A-Za-z0-9])_[^_\n]+_(?![A-Za-z0-9])"
    r"|~[^~\n]+~"
    r"|^(?:>|&gt;).*$"
    r"|:[a-z0-9_+'-]+:",
    re.MULTILINE,
)
# Characters that can hide or reorder text: the bidi controls, every other format character,
# control characters other than newline and tab, and the invisible fillers.
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
FILLERS = set("\u034f\u115f\u1160\u3164\uffa0")


def outside_code(text: str) -> str:
    """The text with every code span blanked: what Slack may still format."""
    return CODE.sub("⟨code⟩", text)


def formatting(text: str) -> list[str]:
    """Formatting Slack would apply to ``text``, in order (dates, which the bot writes, aside)."""
    return FORMATTING.findall(_DATE.sub("", outside_code(text)))


def hidden_characters(text: str) -> list[str]:
    return [
        f"U+{ord(c):04X}"
        for c in text
        if c in BIDI
        or c in FILLERS
        or unicodedata.category(c) in ("Cf", "Zl", "Zp")
        or (unicodedata.category(c) == "Cc" and c not in "\n\t")
    ]


def mrkdwn_texts(payload: dict[str, Any]) -> list[str]:
    """Every text Slack formats: mrkdwn objects and a message's top-level ``text``."""
    top = [payload["text"]] if isinstance(payload.get("text"), str) else []
    return top + _mrkdwn(payload)


def _mrkdwn(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["text"]] if node.get("type") == "mrkdwn" else []
        return found + [s for v in node.values() for s in _mrkdwn(v)]
    if isinstance(node, list):
        return [s for v in node for s in _mrkdwn(v)]
    return []


def plain_text_objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node] if node.get("type") == "plain_text" else []
        return found + [o for v in node.values() for o in plain_text_objects(v)]
    if isinstance(node, list):
        return [o for v in node for o in plain_text_objects(v)]
    return []


def all_strings(node: Any) -> list[str]:
    """Every string the payload carries, shown or not (values, ids, metadata)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in all_strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in all_strings(v)]
    return []
