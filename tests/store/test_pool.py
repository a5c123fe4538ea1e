"""Pooled PostgreSQL connections: one the server closed while it sat idle is replaced before
use; one handed back a moment ago is used without a round trip to check it."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text

from store import engines as store_engines
from store.db import Database


@pytest.fixture
def database(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url, pool_size=1)
    yield database
    database.dispose()


def _backend(database: Database) -> int:
    with database.transaction() as s:
        return int(s.scalar(text("SELECT pg_backend_pid()")))


def _pings(monkeypatch: pytest.MonkeyPatch, database: Database) -> list[int]:
    pings: list[int] = []
    ping = type(database.engine.dialect).do_ping

    def counted(self, dbapi_connection):  # type: ignore[no-untyped-def]
        pings.append(1)
        return ping(self, dbapi_connection)

    monkeypatch.setattr(type(database.engine.dialect), "do_ping", counted)
    return pings


def test_a_connection_handed_back_just_now_is_not_checked(database, monkeypatch):
    first = _backend(database)
    pings = _pings(monkeypatch, database)
    assert [_backend(database) for _ in range(5)] == [first] * 5
    assert pings == []


def test_an_idle_connection_the_server_closed_is_replaced_before_use(database, pg_url, monkeypatch):
    monkeypatch.setattr(store_engines, "IDLE_PING_SECONDS", 0.0)  # every pooled one counts as idle
    first = _backend(database)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    pings = _pings(monkeypatch, database)
    assert _backend(database) != first  # no error reached the caller
    assert len(pings) == 1
