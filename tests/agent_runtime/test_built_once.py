"""The statements of a click's path are built once per process, not on every click: building
one (and its cache key) costs a tenth to a fifth of a millisecond of CPU each time, and a click
sends a score of them."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from sqlalchemy.sql.cache_key import HasCacheKey

from tests.agent_runtime.engine_env import REVIEWER, Env, decide, paused_run

OURS = ("/agent_runtime/", "/store/", "/bot/")


def _builders(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Where our code had a statement's cache key made (each time a statement is built anew:
    one built once keeps its key). Not SQLAlchemy's own second read of a ``selectinload``,
    which it builds for each load (and compiles once)."""
    built: Counter[str] = Counter()
    make = HasCacheKey._generate_cache_key

    def counted(self: HasCacheKey) -> object:
        frame = sys._getframe(1)
        if any(_loader(f) for f in _frames(frame)):
            return make(self)
        while frame is not None and not any(p in frame.f_code.co_filename for p in OURS):
            frame = frame.f_back
        if frame is not None:
            built[f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"] += 1
        return make(self)

    monkeypatch.setattr(HasCacheKey, "_generate_cache_key", counted)
    return built


def _frames(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _loader(frame: FrameType) -> bool:
    return frame.f_code.co_filename.endswith("sqlalchemy/orm/strategies.py")


def test_a_click_that_approves_and_runs_a_gated_tool_builds_no_statement(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision, the claim, the resume with the gate's checks at the point of effect, the
    outcome and the card: after one click has run, the next builds nothing."""
    first, second = (paused_run(env)[1] for _ in range(2))
    assert decide(env, action_id=first, actor=REVIEWER, decision="approve").completed
    view = env.engine.approval_of_action(second)  # what the card shows: read before the click
    assert view is not None
    built = _builders(monkeypatch)
    result = env.engine.decide(
        action_id=second, actor=REVIEWER, decision="approve", seen_hash=view.actions[0].action_hash
    )
    assert result.completed
    assert env.notes.finished, "the second run ran to its end"
    assert built == Counter(), built
