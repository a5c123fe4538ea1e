"""The choices of an edit modal's enum field: a select when each reads apart from the others
in full (no look-alikes, nothing cut short), named by a digest when too long to be an option's
value; and JSON as the store keeps it."""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from typing import Any

from bot.text import plain, plain_text

MAX_CHOICES = 100
"""What a select holds; more choices are typed (and checked by the tool's schema)."""
OPTION_VALUE_MAX = 150
DIGEST = "#"
"""Starts an option value naming a choice too long to be one by its digest (JSON never does)."""
LABEL_MAX = 75


def choices(prop: dict[str, Any]) -> list[Any]:
    listed = prop.get("enum")
    return list(listed) if isinstance(listed, list) and listed else [prop.get("const")]


def option_value(choice: Any) -> str:
    """The choice's JSON, or past what an option value holds, its digest."""
    text = json.dumps(choice)
    if len(text) <= OPTION_VALUE_MAX:
        return text
    return DIGEST + hashlib.sha256(text.encode()).hexdigest()


def _labels(listed: list[Any]) -> list[str]:
    """The choices as a reviewer reads them: strings as themselves when every choice is one,
    else each as JSON (the number 1 and the string "1" never look alike)."""
    strings = all(isinstance(c, str) for c in listed)
    return [c if strings else json.dumps(c, ensure_ascii=False) for c in listed]


def _alike(text: str) -> str:
    """What a reader may not tell apart: letter forms, case, runs of spaces."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def enum_kind(prop: dict[str, Any]) -> str:
    """A select when every choice shows in full and reads apart from the others; else a
    text field (the choice's own text when every choice is a string, else JSON) that the
    tool's schema checks."""
    listed = choices(prop)
    labels = _labels(listed)
    whole = all(len(plain(text, LABEL_MAX + 1)) <= LABEL_MAX for text in labels)
    apart = len({_alike(plain(text, LABEL_MAX)) for text in labels}) == len(labels)
    if len(listed) <= MAX_CHOICES and whole and apart:
        return "enum"
    return "typed_string" if all(isinstance(c, str) for c in listed) else "typed_json"


def select(prop: dict[str, Any], value: Any) -> dict[str, Any]:
    listed = choices(prop)
    options = [
        {"text": plain_text(text, LABEL_MAX), "value": option_value(c)}
        for c, text in zip(listed, _labels(listed), strict=True)
    ]
    selected = next((o for o in options if o["value"] == option_value(value)), None)
    element: dict[str, Any] = {"type": "static_select", "options": options}
    if selected:
        element["initial_option"] = selected
    return element


def picked(value: str, prop: dict[str, Any]) -> Any:
    """The choice an option names: by its digest, or its JSON."""
    if value.startswith(DIGEST):
        named = [c for c in choices(prop) if option_value(c) == value]
        if not named:  # drawn from a schema the tool no longer has
            raise ValueError("That choice is no longer offered: pick one again.")
        return named[0]
    return parse_json(value)


def _not_json(constant: str) -> Any:
    raise ValueError(f"Not valid JSON: {constant} is not a number JSON can hold.")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"Not valid JSON: {text} is too large a number.")
    return number


def parse_json(text: str) -> Any:
    """JSON as the store keeps it: NaN and infinities (which Python's parser takes) are not."""
    try:
        return json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise ValueError(f"Not valid JSON: {exc.msg} (line {exc.lineno}).") from None
    except RecursionError:
        raise ValueError("Not valid JSON here: nested too deeply.") from None
