"""The edit modal, generated from the tool's argument schema (JSON schema), and its parsing.

string -> text input (multiline when long), enum -> select (a text input when its choices do
not fit one or would read alike), boolean -> radio buttons, integer/number -> number input,
arrays and objects -> JSON text input. The tool name is fixed.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from bot.blocks.edit_choices import enum_kind, parse_json, picked, select
from bot.ids import BlockId, CallbackId, InputId
from bot.text import has_hidden_characters, plain_text

MAX_FIELDS = 90
INPUT_MAX = 3000
_TRUE, _FALSE = "true", "false"
_TYPED = {"typed_string": "string", "typed_json": "json"}
"""Choices typed into a text field, read as a string or as JSON."""
_ELEMENT_TYPES = {
    "enum": "static_select",
    "boolean": "radio_buttons",
    "integer": "number_input",
    "number": "number_input",
}


def _kind(prop: Any) -> tuple[str, dict[str, Any]]:
    """Collapse ``anyOf [T, null]`` and name the widget for a property. A schema that is not
    an object (``true``: anything) gets a JSON field."""
    if not isinstance(prop, dict):
        return "json", {}
    options = [
        p for p in prop.get("anyOf", []) if not isinstance(p, dict) or p.get("type") != "null"
    ]
    if len(options) == 1 and not isinstance(options[0], dict):
        return "json", {k: v for k, v in prop.items() if k != "anyOf"}
    if len(options) == 1:
        prop = {**options[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
    if "enum" in prop or "const" in prop:
        return "enum", prop
    return {
        "string": "string",
        "boolean": "boolean",
        "integer": "integer",
        "number": "number",
    }.get(str(prop.get("type")), "json"), prop


def field_block_id(name: str) -> str:
    """Block ids are ours: the argument's name when it is short and plain, else a digest."""
    if len(name) <= 64 and name.replace("_", "").isalnum():
        return f"{BlockId.EDIT_FIELD_PREFIX}{name}"
    return f"{BlockId.EDIT_FIELD_PREFIX}#{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def _widget(prop: Any) -> tuple[str, dict[str, Any]]:
    kind, resolved = _kind(prop)
    return (enum_kind(resolved) if kind == "enum" else kind), resolved


def _element(kind: str, prop: dict[str, Any], value: Any) -> dict[str, Any] | None:
    if kind == "enum":
        return select(prop, value)
    kind = _TYPED.get(kind, kind)
    if kind == "boolean":
        options = [
            {"text": {"type": "plain_text", "text": "Yes"}, "value": _TRUE},
            {"text": {"type": "plain_text", "text": "No"}, "value": _FALSE},
        ]
        element: dict[str, Any] = {"type": "radio_buttons", "options": options}
        if isinstance(value, bool):
            element["initial_option"] = options[0] if value else options[1]
        return element
    if kind in ("integer", "number"):
        element = {"type": "number_input", "is_decimal_allowed": kind == "number"}
        if isinstance(value, int | float) and not isinstance(value, bool):
            element["initial_value"] = str(value)
        return element
    text = value if kind == "string" and isinstance(value, str) else None
    if text is None:
        text = "" if value is None else json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > INPUT_MAX or has_hidden_characters(text):
        # Too long for Slack, or a text box would show it disguised (or save it changed):
        # the value is kept as it is.
        return None
    element = {
        "type": "plain_text_input",
        "multiline": kind == "json" or len(text) > 80 or "\n" in text,
        "max_length": INPUT_MAX,
    }
    if text:
        element["initial_value"] = text
    return element


def edit_modal(
    *, action_id: str, tool_name: str, schema: dict[str, Any], current: dict[str, Any]
) -> dict[str, Any]:
    properties: dict[str, Any] = dict(schema.get("properties") or {})
    for name in current:
        properties.setdefault(name, {})
    required = set(schema.get("required") or [])
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": plain_text(f"Tool: {tool_name}", 300),
        }
    ]
    kept: list[str] = []
    for name, prop in list(properties.items())[:MAX_FIELDS]:
        kind, resolved = _widget(prop)
        element = _element(kind, resolved, current.get(name, resolved.get("default")))
        if element is None:
            kept.append(name)
            continue
        element["action_id"] = InputId.VALUE
        label = name if _TYPED.get(kind, kind) != "json" else f"{name} (JSON)"
        blocks.append(
            {
                "type": "input",
                "block_id": field_block_id(name),
                "label": plain_text(label, 2000),
                "element": element,
                "optional": name not in required,
            }
        )
    if kept:
        note = (
            "Kept as they are (too long to edit here, or holding hidden characters): "
            + ", ".join(kept)
        )
        blocks.append({"type": "context", "elements": [plain_text(note, 2000)]})
    return {
        "type": "modal",
        "callback_id": CallbackId.EDIT_MODAL,
        "private_metadata": action_id,
        "title": {"type": "plain_text", "text": "Edit arguments"},
        "submit": {"type": "plain_text", "text": "Save and approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def parse_edit(
    view: dict[str, Any], *, schema: dict[str, Any], current: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """(edited arguments, errors by block id). Fields left out of the modal keep their value."""
    values = view.get("state", {}).get("values", {})
    properties: dict[str, Any] = dict(schema.get("properties") or {})
    for name in current:
        properties.setdefault(name, {})
    args = dict(current)
    errors: dict[str, str] = {}
    for name, prop in properties.items():
        block = field_block_id(name)
        if block not in values:
            continue
        kind, resolved = _widget(prop)
        raw = values[block].get(InputId.VALUE, {})
        if raw.get("type", _element_type(kind)) != _element_type(kind):
            # Drawn from another schema (the tool changed since the form opened): what was
            # entered may mean something else now.
            errors[block] = "This field changed since the form opened: open it again."
            continue
        try:
            parsed, present = _parse_value(kind, raw, resolved)
        except ValueError as exc:
            errors[block] = str(exc)
            continue
        if present:
            args[name] = parsed
        elif kind not in ("enum", "boolean") and _showed(kind, resolved, current, name):
            args.pop(name, None)  # a text field emptied (the tool's schema says if it may be)
        # A select or a yes/no left without a choice showed none (the value was not one
        # offered) and cannot be cleared, and a field that opened empty and stayed so was
        # left as it was: the value stays, never replaced by a default nobody saw.
    return args, errors


def _showed(kind: str, prop: dict[str, Any], current: dict[str, Any], name: str) -> bool:
    """Whether the field opened with something in it (as ``edit_modal`` drew it)."""
    drawn = _element(kind, prop, current.get(name, prop.get("default")))
    return drawn is not None and "initial_value" in drawn


def errors_on_fields(by_name: dict[str, str], fields: list[str]) -> dict[str, str]:
    """The tool's errors by argument, by the form's blocks. An error on no field of the form
    (on the arguments as a whole, or on one kept out of it) goes on the first field, naming
    its argument, with any others there: none hides another."""
    errors: dict[str, str] = {}
    elsewhere: list[str] = []
    for name, message in by_name.items():
        block = field_block_id(name)
        if block in fields or not fields:
            errors[block] = message
        else:
            elsewhere.append(f"{name}: {message}")
    if elsewhere:
        first = fields[0]
        errors[first] = "; ".join([*([errors[first]] if first in errors else []), *elsewhere])
    return errors


def _element_type(kind: str) -> str:
    return _ELEMENT_TYPES.get(kind, "plain_text_input")


def _parse_value(kind: str, raw: dict[str, Any], prop: dict[str, Any]) -> tuple[Any, bool]:
    if kind in ("enum", "boolean"):
        option = raw.get("selected_option")
        if not option:
            return None, False
        value = str(option.get("value"))
        return (value == _TRUE, True) if kind == "boolean" else (picked(value, prop), True)
    kind = _TYPED.get(kind, kind)
    text = raw.get("value")
    if text is None or text == "":
        return None, False
    if kind == "integer":
        try:
            return int(text), True
        except ValueError:
            raise ValueError("Enter a whole number.") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("Enter a number.") from None
        if not math.isfinite(number):
            raise ValueError("Enter a finite number.")
        return number, True
    if kind == "json":
        return parse_json(text), True
    return text, True
