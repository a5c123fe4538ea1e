"""The ids a log line belongs to (run, approval, action, actor), carried by the context that
works on them, so every line logged on the way (the engine's, the store's, a library's) can be
traced to one approval without passing ids to each call."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

FIELDS = ("run_id", "request_id", "action_id", "actor", "inbox_item")
_current: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("trace", default={})  # noqa: B039 - never mutated: each bind makes a new dict


@contextmanager
def bind(**ids: str | int | None) -> Iterator[None]:
    """Add ids for the duration of the block (``None`` values are left out)."""
    merged = {**_current.get(), **{k: str(v) for k, v in ids.items() if v is not None}}
    token = _current.set(merged)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> dict[str, str]:
    return _current.get()
