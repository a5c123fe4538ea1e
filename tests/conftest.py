"""Shared fixtures: real SQLite files, real PostgreSQL databases, and the bot served over HTTP."""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from agent_runtime.agents.workspace import Workspace
from bot.app import Bot, build_bot
from bot.http_server import make_server
from bot.sandbox import people
from bot.sandbox.driver import SlackDriver
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.settings import load_settings

PG_ADMIN_URL = os.environ.get("TEST_DATABASE_URL", "postgresql://127.0.0.1:5432/test")


def _pg_available() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    problem = _pg_available()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(
                f"PostgreSQL is required in CI but unreachable at {PG_ADMIN_URL}: {problem}"
            )
        pytest.skip(
            f"PostgreSQL not reachable at {PG_ADMIN_URL} ({problem}); set TEST_DATABASE_URL"
        )
    return PG_ADMIN_URL


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"approval_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = pg_admin_url.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bot.db'}"


@dataclass
class Harness:
    """The bot serving HTTP on a free port, the Slack sandbox, and a driver acting as users."""

    bot: Bot
    sandbox: SlackSandbox
    driver: SlackDriver
    workspace: Workspace
    url: str

    @property
    def state(self):  # type: ignore[no-untyped-def]
        return self.sandbox.state


@pytest.fixture
def serve_bot(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    started: list[tuple[Bot, object, SlackSandbox | None]] = []

    def start(
        database_url: str,
        *,
        clock: object = None,
        sandbox: SlackSandbox | None = None,
        **overrides: object,
    ) -> Harness:
        """``sandbox``: share another harness's Slack (a second replica, a restart)."""
        shared = sandbox is not None
        if sandbox is None:
            sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
        secret = secrets.token_hex(16)
        settings = load_settings(
            slack_bot_token=SANDBOX_TOKEN,
            slack_signing_secret=secret,
            slack_app_token=None,
            slack_api_url=sandbox.api_url,
            database_url=database_url,
            workspace_dir=tmp_path / "workspace",
            **overrides,
        )
        bot = build_bot(settings, clock=clock) if clock else build_bot(settings)
        server = make_server(bot, host="127.0.0.1", port=0).start()
        started.append((bot, server, None if shared else sandbox))
        url = f"http://127.0.0.1:{server.port}"
        driver = SlackDriver(sandbox=sandbox, bot_url=url, signing_secret=secret)
        return Harness(bot, sandbox, driver, Workspace(tmp_path / "workspace"), url)

    yield start
    for bot, server, sandbox in reversed(started):
        server.stop()  # type: ignore[attr-defined]
        bot.close(drain_seconds=30)
        if sandbox is not None:
            sandbox.stop()
