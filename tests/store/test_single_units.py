"""One-statement units: on PostgreSQL the statement is its own transaction (one round trip
instead of three), and nothing that needs a real transaction can run in one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, text

from store.audit_models import AuditEvent
from store.db import Database
from store.migrate import upgrade
from store.repositories import AuditRepository
from tests.wire import watching


def _store(url: str) -> Iterator[Database]:
    database = Database(url)
    upgrade(database.engine)
    yield database
    database.dispose()


@pytest.fixture
def db(store_url: str) -> Iterator[Database]:
    yield from _store(store_url)


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[Database]:
    yield from _store(pg_url)


def test_a_single_unit_is_one_round_trip_and_its_own_transaction(pg_db: Database) -> None:
    with watching(pg_db) as single, pg_db.single() as s:
        s.execute(text("SELECT 'single unit'"))
    with watching(pg_db) as unit, pg_db.transaction() as s:
        s.execute(text("SELECT 'transaction'"))
    assert (single.round_trips, single.state_after("single unit")) == (1, "I")
    assert (unit.round_trips, unit.state_after("transaction")) == (3, "T")


def test_the_orm_unit_of_work_is_refused_in_a_single_unit(db: Database) -> None:
    """An audit append takes the chain's row lock and writes two rows: in autocommit the lock
    would be gone before the insert. It is refused, and nothing is written."""
    with pytest.raises(RuntimeError, match=r"use Database\.transaction"), db.single() as s:
        AuditRepository(s).record("not_in_a_single_unit")
    with db.transaction() as s:
        assert s.scalar(select(func.count()).select_from(AuditEvent)) == 0
        report = AuditRepository(s).verify()
        assert (report.consistent, report.checked) == (True, 0)


def test_a_second_statement_in_a_single_unit_is_refused(db: Database) -> None:
    """On PostgreSQL the first would be committed already, whatever became of the second: a
    unit that needs two is refused on every backend, so that SQLite's test runs find it too."""
    with pytest.raises(RuntimeError, match=r"use Database\.transaction"), db.single() as s:
        s.execute(text("SELECT 1"))
        s.execute(text("SELECT 2"))


def test_a_second_statement_on_the_units_connection_is_refused_too(db: Database) -> None:
    """Repositories send Core statements straight to the unit's connection, past the ORM: the
    guard counts what the connection runs, so those are refused as well."""
    with pytest.raises(RuntimeError, match=r"use Database\.transaction"), db.single() as s:
        s.connection().execute(text("SELECT 1"))
        s.connection().execute(text("SELECT 2"))


def test_the_connection_of_a_single_unit_goes_back_to_the_pool_unmarked(db: Database) -> None:
    """The pooled connection a unit used (a refused one too) may serve a transaction next."""
    for _ in range(2):
        with pytest.raises(RuntimeError), db.single() as s:
            s.execute(text("SELECT 1"))
            s.execute(text("SELECT 2"))
        with db.transaction() as s:
            assert [s.scalar(text("SELECT 1")), s.scalar(text("SELECT 2"))] == [1, 2]
