"""The engine on each kind of store, for modules that want both (a module defining its own
``env`` uses that one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.graph_runtime import close_checkpointer
from tests.agent_runtime.engine_env import Env, make_env


def _on_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    url = None if request.param == "sqlite" else request.getfixturevalue("migrated_pg_url")
    env = make_env(tmp_path, url=url)
    yield env
    close_checkpointer(env.runtime.checkpointer)
    env.db.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    yield from _on_store(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgresql"])
def on_both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    """``env`` on each kind of store, for a module whose own ``env`` is SQLite's alone."""
    yield from _on_store(request, tmp_path)
