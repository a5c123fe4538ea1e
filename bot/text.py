"""Making untrusted text inert in Slack, and keeping it within Slack's length limits."""

from __future__ import annotations

import html
import re

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so mentions, broadcasts and links from agents stay text."""
    return html.escape(text, quote=False)


def truncate(text: str, limit: int, *, marker: str = "…") -> str:
    return text if len(text) <= limit else text[: max(0, limit - len(marker))] + marker


def mrkdwn(text: str, limit: int = 3000) -> str:
    """Escaped and truncated; truncation happens after escaping so entities are never cut."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    cut = escaped[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def code_block(text: str, limit: int = 2900) -> str:
    body = mrkdwn(text.replace("```", "'''"), limit - 8)
    return f"```{body}```"


def mention(user_id: str) -> str:
    """A user mention we build ourselves, only from a well-formed Slack user id."""
    return f"<@{user_id}>" if _USER_ID.match(user_id) else escape(user_id)


def plain(text: str, limit: int) -> str:
    """For plain_text fields: no escaping needed, only a length bound and a non-empty value."""
    return truncate(text, limit) or " "


def code_chunks(text: str, size: int = 2900) -> list[str]:
    """All of ``text`` as code blocks of at most ``size`` characters each, nothing dropped:
    split after escaping, never inside an entity."""
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for char in text.replace("```", "'''"):
        piece = escape(char)
        if length + len(piece) > size - 6:
            chunks.append("```" + "".join(current) + "```")
            current, length = [], 0
        current.append(piece)
        length += len(piece)
    chunks.append("```" + "".join(current) + "```")
    return chunks
