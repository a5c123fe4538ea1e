"""The choices of an edit modal's enum field: a select when they fit one and read apart,
named by a digest when too long to be an option's value, with "leave it out" for an optional
argument; and JSON as the store keeps it."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from bot.text import plain, plain_text

MAX_CHOICES = 99
"""A select holds 100 options, one of them maybe "leave it out"; more choices are typed (and
checked by the tool's schema)."""
OPTION_VALUE_MAX = 150
DIGEST = "#"
"""Starts an option value naming a choice too long to be one by its digest (JSON never does)."""
LEAVE_OUT = "!leave-out"
"""The option leaving an optional argument out (not JSON, not a digest)."""
OMIT = object()
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


def label(choice: Any) -> str:
    """A choice as a reviewer reads it: a string as itself, anything else as JSON (so the
    number 1, the string "1" and true never look alike)."""
    return plain(choice if isinstance(choice, str) else json.dumps(choice), LABEL_MAX)


def leave_out_label(prop: dict[str, Any]) -> str | None:
    """The label of leaving an optional argument out, saying what the tool then takes; none
    when its default is one of the choices (picking it is the same) or too long to show."""
    if "default" not in prop:
        return "(leave it out)"
    default = prop["default"]
    shown = default if isinstance(default, str) else json.dumps(default)
    offered = {json.dumps(c) for c in choices(prop)}  # JSON's equality: 1 is not true
    if json.dumps(default) in offered or len(shown) > LABEL_MAX - len("(leave it out: default )"):
        return None
    return f"(leave it out: default {shown})"


def enum_kind(prop: dict[str, Any], *, optional: bool) -> str:
    """A select when every choice fits one and reads differently from the others; else a
    text field (the choice's own text when every choice is a string, else JSON) that the
    tool's schema checks."""
    listed = choices(prop)
    labels = [label(c) for c in listed]
    leaving = leave_out_label(prop) if optional else None
    if leaving is not None:
        labels.append(leaving)
    if len(listed) <= MAX_CHOICES and len(set(labels)) == len(labels):
        return "enum"
    return "typed_string" if all(isinstance(c, str) for c in listed) else "typed_json"


def select(prop: dict[str, Any], value: Any, *, optional: bool) -> dict[str, Any]:
    options = [
        {"text": plain_text(label(c), LABEL_MAX), "value": option_value(c)} for c in choices(prop)
    ]
    selected = next((o for o in options if o["value"] == option_value(value)), None)
    leaving = leave_out_label(prop) if optional else None
    if leaving is not None:  # Slack cannot clear a select once picked
        options.append({"text": plain_text(leaving, LABEL_MAX), "value": LEAVE_OUT})
    element: dict[str, Any] = {"type": "static_select", "options": options}
    if selected:
        element["initial_option"] = selected
    return element


def picked(value: str, prop: dict[str, Any]) -> Any:
    """The choice an option names: left out, by its digest, or its JSON."""
    if value == LEAVE_OUT:
        return OMIT
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
