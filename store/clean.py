"""Text as PostgreSQL can store it, whatever an agent, a reviewer or a tool handed over: free
text is cleaned where it is written (``CleanText`` columns), and the audit log's values before
they are hashed (so the stored value is the hashed one)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Text, TypeDecorator


def clean_text(value: str) -> str:
    """Any Python string as one UTF-8 and PostgreSQL can store: lone surrogates and NUL become
    U+FFFD, so the stored value is the hashed one and verifies (pairs are joined)."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def clean_json(value: Any) -> Any:
    """``clean_text`` over every key and string of a JSON value."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple is written as a list
        return [clean_json(v) for v in value]
    return value


def json_text(value: Any) -> str:
    """``value`` as JSON text PostgreSQL's JSON functions take (they refuse the escapes of a
    NUL and of a lone surrogate): serialized once, and cleaned first only if it may need it."""
    text = json.dumps(value)
    return json.dumps(clean_json(value)) if _suspect(text) else text


def storable(value: Any) -> Any:
    """``value`` as ``json_text`` stores it: the same object if nothing needed cleaning, for
    whoever works on it in memory to see what was stored."""
    return clean_json(value) if _suspect(json.dumps(value)) else value


def _suspect(text: str) -> bool:
    """JSON text (``json.dumps``: ASCII, lowercase escapes) that may hold a NUL or a lone
    surrogate. An emoji's surrogate pair matches too, and comes out of ``clean_json`` as it
    went in."""
    return "\\u0000" in text or "\\ud" in text


class CleanText(TypeDecorator[str]):
    """Free text (a request, a reason, a tool's result, an outcome quoting an agent's error):
    written cleaned, never refused. PostgreSQL refuses a NUL in text, and a write refused
    there would lose the click, or leave an effect looking as if it never finished."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else clean_text(value)
