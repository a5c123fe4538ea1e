"""What a tool rule's ``redact`` keeps out of the audit log: the values at dotted paths into a
call's arguments (``token``, ``headers.authorization``), wherever the call puts them.

The call's arguments come from the agent and must be assumed hostile: the walk copies only
what it passes through, never changes the arguments themselves (the tool and the action hash
see the real values), needs no recursion however deep a payload nests, and takes out a value
whole when it is not the object or list the path goes on into (the secret may be in it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agent_runtime.constraints import SHOWN_CHARS

REDACTED = "[redacted]"
MIN_REDACTED = 3
"""Shorter values are not searched for in free text (they would match everywhere)."""
NOT_IN_A_NAME = frozenset(".[]*")
"""An index (``items[0]``) or a wildcard (``*``) would silently match nothing: lists are
entered element by element without one."""

Steps = dict[str, "Steps | None"]
"""The paths as a tree of names (casefolded); ``None`` ends a path: the value there goes."""


def check_path(path: str) -> str:
    """A policy's ``redact`` entry: argument names joined by dots. Refused at load when
    malformed, so a typo cannot quietly leave a secret in the log."""
    names = path.split(".")
    for name in names:
        if not name or name != name.strip() or NOT_IN_A_NAME & set(name):
            raise ValueError(
                f"{path!r} is not a dotted path of argument names like headers.authorization "
                "(no empty names, no spaces around a name, no [index] or *: a list on the "
                "way is entered element by element)"
            )
    return path


def steps_of(paths: Iterable[str]) -> Steps:
    root: Steps = {}
    for path in paths:
        node: Steps | None = root
        *through, last = path.casefold().split(".")
        for name in through:
            node = node.setdefault(name, {}) if node is not None else None
        if node is not None:  # None: a shorter path already takes out the whole value
            node[last] = None
    return root


def redact(args: Mapping[str, Any], paths: Iterable[str]) -> tuple[dict[str, Any], list[Any]]:
    """``args`` with the values at ``paths`` replaced by ``REDACTED``, and the values taken
    out. Names match whatever their case; a list met on the way is entered element by
    element (lists in lists too)."""
    root = dict(args)
    taken: list[Any] = []
    pending: list[tuple[Any, Steps]] = [(root, steps_of(paths))]
    while pending:
        node, steps = pending.pop()
        if isinstance(node, list):
            places: list[tuple[Any, Steps | None]] = [(i, steps) for i in range(len(node))]
        else:
            places = [
                (key, steps[key.casefold()])
                for key in node
                if isinstance(key, str) and key.casefold() in steps
            ]
        for place, rest in places:
            value = node[place]
            opened = opened_copy(value) if rest is not None else None
            if rest is None or opened is None:
                node[place] = REDACTED
                taken.append(value)
            else:
                node[place] = opened
                pending.append((opened, rest))
    return root, taken


def opened_copy(value: object) -> dict[Any, Any] | list[Any] | None:
    """A shallow copy to go on into, or None for a value that is not an object or a list."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, list | tuple):
        return list(value)
    return None


def quoted_forms(value: object) -> set[str]:
    """How text may quote ``value``: as it is, as JSON or Python's repr (which escape quotes,
    newlines and backslashes), and a long string as messages clip it."""
    forms = {json.dumps(value, default=str), repr(value)}
    if isinstance(value, str):
        forms |= {value, repr(value)[1:-1], json.dumps(value)[1:-1], value[:SHOWN_CHARS]}
        forms |= {json.dumps(value, ensure_ascii=False)[1:-1]}
    return {form for form in forms if len(form) >= MIN_REDACTED}


def taken_forms(value: object) -> set[str]:
    """How text may quote a redacted value: the value itself, and, for an object or a list,
    each string or number in it (a message may quote one part alone)."""
    if value is None:
        return set()
    forms = quoted_forms(value)
    pending = [value] if opened_copy(value) is not None else []
    while pending:
        current = pending.pop()
        if isinstance(current, Mapping):
            pending.extend(current.values())
        elif isinstance(current, list | tuple):
            pending.extend(current)
        elif isinstance(current, str | int | float) and not isinstance(current, bool):
            forms |= quoted_forms(current)
    return forms
