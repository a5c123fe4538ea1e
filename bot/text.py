"""Making untrusted text inert in Slack, and keeping it within Slack's length limits.

Untrusted text is whatever the agent, a requester or a reviewer wrote: tool names, descriptions,
arguments, previews, reasons, results. It reaches Slack in one of three ways:

- ``verbatim()`` inside the bot's mrkdwn sentences: as code (inline for one line, a block for
  several). Slack formats nothing inside code, so copies of the bot's own status lines
  (``*:white_check_mark: Approved*``), italics, strikes, quotes and emoji shortcodes show as the
  characters they are. Code keeps every character of a recipient or an amount, in a font where
  ``l``/``1`` and ``O``/``0`` differ, and marks the text visibly as not the bot's. Changing
  characters instead (lookalikes, zero-width breaks) would make a reviewer read or copy a value
  that is not the one that runs.
- ``plain_text()`` objects (modals, confirmations): never formatted, emoji shortcodes left as text.
- ``mrkdwn()`` for sentences the bot writes itself from ids and policy names: escaped only.

All three go through ``reveal()``: characters that hide or reorder text (bidi controls, other
invisible format characters, control characters) become visible markers such as ``[U+202E]``,
so a reviewer sees that the value holds something unusual instead of a disguised value.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")
_LINE_BREAK = re.compile(r"\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# Invisible characters outside the format (Cf) category: combining grapheme joiner, Hangul fillers.
_FILLERS = frozenset("\u034f\u115f\u1160\u3164\uffa0")
# Shown instead of a backtick in code, which no agent text may use to close its code span.
GRAVE = "\u02cb"


def _hidden(char: str) -> bool:
    if char in "\n\t":
        return False
    return char in _FILLERS or unicodedata.category(char) in ("Cf", "Cc")


def has_hidden_characters(text: str) -> bool:
    return any(_hidden(c) for c in text)


def reveal(text: str) -> str:
    """Line breaks as ``\\n``; every character that can hide or reorder text (U+202A-U+202E,
    U+2066-U+2069, U+200E, U+200F, U+061C, zero-width and other format or control characters)
    as a visible ``[U+XXXX]`` marker, never silently dropped."""
    text = _LINE_BREAK.sub("\n", text)
    if not has_hidden_characters(text):
        return text
    return "".join(f"[U+{ord(c):04X}]" if _hidden(c) else c for c in text)


def escape(text: str) -> str:
    """Hidden characters revealed, then ``&``, ``<`` and ``>`` escaped, so mentions, broadcasts
    and links from agents stay text."""
    return html.escape(reveal(text), quote=False)


def truncate(text: str, limit: int, *, marker: str = "…") -> str:
    return text if len(text) <= limit else text[: max(0, limit - len(marker))] + marker


def _cut(escaped: str, limit: int) -> str:
    """Truncate escaped text without cutting an entity in two."""
    if len(escaped) <= limit:
        return escaped
    cut = escaped[: max(0, limit - 1)]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def clip(text: str, limit: int) -> str:
    """A mrkdwn text the bot composed, cut to ``limit`` characters but never inside a code span
    (its untrusted text would lose its protection) nor inside an entity."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 1)]
    i = cut.find("`")
    while i != -1:
        fence = "```" if cut.startswith("```", i) else "`"
        end = cut.find(fence, i + len(fence))
        if end == -1:
            cut = cut[:i]
            break
        i = cut.find("`", end + len(fence))
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def mrkdwn(text: str, limit: int = 3000) -> str:
    """For text the bot writes itself (ids, policy names): escaped and truncated. Agent text
    goes through ``verbatim()`` instead."""
    return _cut(escape(text), limit)


def _code_body(text: str) -> str:
    return escape(text).replace("`", GRAVE)


def verbatim(text: str, limit: int = 3000) -> str:
    """Untrusted text inside a mrkdwn sentence, as code: literal, at most ``limit`` characters.
    One line without surrounding spaces is inline code; anything else a code block, since inline
    code cannot span lines."""
    body = _code_body(text)
    if not body:
        return "(empty)"
    fence = "`" if "\n" not in body and body == body.strip() else "```"
    return fence + _cut(body, limit - 2 * len(fence)) + fence


def code_block(text: str, limit: int = 2900) -> str:
    """Untrusted text as a code block that nothing in it can close."""
    return "```" + (_cut(_code_body(text), limit - 6) or " ") + "```"


def code_chunks(text: str, size: int = 2900) -> list[str]:
    """All of ``text`` as code blocks of at most ``size`` characters each, nothing dropped:
    split after escaping, never inside an entity."""
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for char in reveal(text):
        piece = html.escape(char, quote=False).replace("`", GRAVE)
        if length + len(piece) > size - 6:
            chunks.append("```" + "".join(current) + "```")
            current, length = [], 0
        current.append(piece)
        length += len(piece)
    chunks.append("```" + ("".join(current) or " ") + "```")
    return chunks


def mention(user_id: str) -> str:
    """A user mention we build ourselves, only from a well-formed Slack user id."""
    return f"<@{user_id}>" if _USER_ID.match(user_id) else escape(user_id)


def plain(text: str, limit: int) -> str:
    """For plain_text fields: hidden characters revealed, a length bound, a non-empty value."""
    return truncate(reveal(text), limit) or " "


def plain_text(text: str, limit: int) -> dict[str, Any]:
    """A plain_text object for untrusted text: emoji shortcodes stay text (``emoji: false``)."""
    return {"type": "plain_text", "text": plain(text, limit), "emoji": False}
