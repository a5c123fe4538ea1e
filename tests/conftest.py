"""Shared fixtures: real SQLite files, real PostgreSQL databases, and the bot served over HTTP."""

from __future__ import annotations

import os
import secrets
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
from tests.migrated import (
    create_database,
    database_url,
    drop_database,
    migrated_pg_template,
    migrated_sqlite_url,
)

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
    name = create_database(pg_admin_url)
    yield database_url(pg_admin_url, name)
    drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    """This test process's migrated database to copy; no other process uses it."""
    name = migrated_pg_template(pg_admin_url)
    yield name
    drop_database(pg_admin_url, name)


@pytest.fixture
def migrated_pg_url(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    """A PostgreSQL database at the newest revision with an unkeyed audit log, for one test."""
    name = create_database(pg_admin_url, template=pg_template)
    yield database_url(pg_admin_url, name)
    drop_database(pg_admin_url, name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A store at the newest revision with an unkeyed audit log (a copy: see tests.migrated)."""
    return migrated_sqlite_url(tmp_path / "bot.db")


@pytest.fixture
def new_sqlite_url(tmp_path: Path) -> str:
    """Where a new store will be: nothing is there yet."""
    return f"sqlite:///{tmp_path / 'new.db'}"


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
