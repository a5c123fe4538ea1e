"""Engines for the operator's DATABASE_URL: which driver, which pool, and what each connection
is set up with (SQLite's write lock up front; PostgreSQL's idle connections checked)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError


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


def create_db_engine(
    database_url: str, *, pool_size: int = 10, connect_timeout: int | None = None
) -> Engine:
    url = sqlalchemy_url(database_url)
    if is_sqlite(database_url):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            hide_parameters=True,
        )
        _configure_sqlite(engine)
        return engine
    connect_args = {"connect_timeout": connect_timeout} if connect_timeout else {}
    # An error's message names its statement, not its values: they may be what a reviewer
    # typed or an argument the policy keeps out of the audit log, and errors are logged.
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        connect_args=connect_args,
        hide_parameters=True,
        # Every check that reads again after a wait or a lost race counts on each statement
        # seeing what committed before it, whatever the database's or role's default.
        isolation_level="READ COMMITTED",
    )
    _ping_when_idle(engine)
    return engine


LOCK_POOL_SIZE = 8
"""Connections kept for advisory locks when idle (as many as inbox workers, by default); more
are opened while more runs' locks are held or waited for by this process."""


def create_lock_engine(database_url: str) -> Engine:
    """PostgreSQL: the connections that hold advisory locks (a run's thread lock, held through
    a whole resume), apart from the pool transactions use. A lock never waits for a connection
    a transaction holds (a decision tries its run's lock while it holds its request's row
    lock), and a lock held through a resume keeps no transaction waiting. When none is idle,
    one more is opened: there are as many as threads holding locks at once."""
    engine = create_engine(
        sqlalchemy_url(database_url),
        pool_size=LOCK_POOL_SIZE,
        max_overflow=-1,
        # The connection handed back last goes out first: one just used is not checked again
        # (``_ping_when_idle``), and a click's lock try costs no round trip more.
        pool_use_lifo=True,
        isolation_level="AUTOCOMMIT",  # a session-level lock outlives any transaction
        hide_parameters=True,
    )
    _ping_when_idle(engine)
    return engine


IDLE_PING_SECONDS = 1.0
"""A pooled connection that sat unused longer than this is checked before it is handed out (the
server may have closed it meanwhile); one handed back just now is not: under load, checking
every connection cost a round trip per transaction."""


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's ``pool_pre_ping``, for idle connections only. A connection that fails the
    check is thrown away and the pool hands out another (``DisconnectionError``)."""

    @event.listens_for(engine.pool, "checkin")
    def _returned(_dbapi_conn: Any, record: Any) -> None:
        record.info[_RETURNED_INFO] = time.monotonic()

    @event.listens_for(engine.pool, "checkout")
    def _check(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get(_RETURNED_INFO)  # None: connected just now
        if returned is None or time.monotonic() - returned < IDLE_PING_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise DisconnectionError(f"an idle pooled connection was closed: {exc}") from exc


_RETURNED_INFO = "returned_at"


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
