"""Engines and sessions for the one database that holds the store and the checkpointer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker


class DatabaseUrlError(ValueError):
    """The DATABASE_URL names a database we cannot use."""


def sqlalchemy_url(database_url: str) -> str:
    """Map the operator's URL (``sqlite:///`` or ``postgresql://``) to a driver-qualified one."""
    try:
        url = make_url(database_url)
    except ArgumentError as exc:
        raise DatabaseUrlError("not a database URL: use sqlite:/// or postgresql://") from exc
    backend = url.get_backend_name()
    if backend == "sqlite":
        return url.set(drivername="sqlite+pysqlite").render_as_string(hide_password=False)
    if backend in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    raise DatabaseUrlError(f"unsupported database {backend!r}: use sqlite:/// or postgresql://")


def is_sqlite(database_url: str) -> bool:
    return make_url(database_url).get_backend_name() == "sqlite"


def sqlite_path(database_url: str) -> str:
    """The file of a ``sqlite:///`` URL (``:memory:`` is refused: two connections must share it)."""
    path = make_url(database_url).database
    if not path or path == ":memory:":
        raise DatabaseUrlError("DATABASE_URL must name a SQLite file, not an in-memory database")
    return path


def create_db_engine(database_url: str, *, pool_size: int = 10) -> Engine:
    url = sqlalchemy_url(database_url)
    if is_sqlite(database_url):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _configure_sqlite(engine)
        return engine
    return create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)


def _configure_sqlite(engine: Engine) -> None:
    """WAL for concurrent readers; BEGIN IMMEDIATE so a writer takes the lock up front.

    pysqlite's own transaction handling is switched off so that our BEGIN is the one used.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class Database:
    """Owns the engine and hands out transactions; callers own the commit boundary."""

    def __init__(self, database_url: str, *, pool_size: int = 10) -> None:
        self.url = database_url
        self.engine = create_db_engine(database_url, pool_size=pool_size)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite(self.url)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """One unit of work: commit on success, roll back on any error."""
        with self._sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
