"""Engines and sessions for the one database that holds the store and the checkpointer."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import typing
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection, CursorResult, Result, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

CONNECT_TIMEOUT = 10  # seconds, for the start-up check: an unreachable host fails in one line
AUDIT_KEY_INFO = "audit_key"
"""``Session.info`` entry holding the AUDIT_KEY (bytes or None) the audit log is chained with."""
AUDIT_SEEN_INFO = "audit_seen"
"""``Session.info`` entry holding the process's :class:`HighWater` of committed audit events."""


class HighWater:
    """The highest count this process has seen of each counter (an audit shard); shared by
    every session of one ``Database``, so a count going backwards (a restored older copy of a
    row) can be noticed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[int, int] = {}

    def value(self, counter: int = 0) -> int:
        return self._values.get(counter, 0)

    def saw(self, value: int, counter: int = 0) -> None:
        with self._lock:
            self._values[counter] = max(self._values.get(counter, 0), value)


class DatabaseUrlError(ValueError):
    """The DATABASE_URL names a database we cannot use."""


class DatabaseUnavailableError(RuntimeError):
    """The database in DATABASE_URL cannot be reached or opened; the message is one line."""


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
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _configure_sqlite(engine)
        return engine
    connect_args = {"connect_timeout": connect_timeout} if connect_timeout else {}
    engine = create_engine(
        url, pool_size=pool_size, max_overflow=pool_size, connect_args=connect_args
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


def check_database(database_url: str, *, create: bool = True) -> None:
    """Connect once, so that an unusable database is one clear line, not a traceback later.
    ``create=False``: a SQLite file that does not exist is refused, not created empty (a
    mistyped path must not leave a new database behind; a missing folder fails as it is)."""
    if is_sqlite(database_url):
        try:
            path = sqlite_path(database_url)
        except DatabaseUrlError as exc:
            raise DatabaseUnavailableError(str(exc)) from None
        folder_exists = os.path.isdir(os.path.dirname(os.path.abspath(path)))
        if not create and folder_exists and not os.path.exists(path):
            raise DatabaseUnavailableError(
                f"DATABASE_URL: there is no SQLite database at {path}; check the path, or "
                "create the store with approval-bot db upgrade"
            )
    engine = create_db_engine(database_url, pool_size=1, connect_timeout=CONNECT_TIMEOUT)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else "no reason"
        where = make_url(database_url).render_as_string(hide_password=True)
        raise DatabaseUnavailableError(f"DATABASE_URL: cannot use {where}: {reason}") from None
    finally:
        engine.dispose()


class Database:
    """Owns the engine and hands out transactions; callers own the commit boundary.

    ``audit_key`` (AUDIT_KEY) rides along in every session's ``info``, so each audit append is
    keyed however deep in the code it happens."""

    def __init__(
        self, database_url: str, *, pool_size: int = 10, audit_key: bytes | None = None
    ) -> None:
        self.url = database_url
        self.audit_key = audit_key
        self.engine = create_db_engine(database_url, pool_size=pool_size)
        info: dict[str, Any] = {AUDIT_KEY_INFO: audit_key, AUDIT_SEEN_INFO: HighWater()}
        self._sessions = sessionmaker(self.engine, expire_on_commit=False, info=info)
        own = (
            self.engine
            if self.is_sqlite
            else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self._single_sessions = sessionmaker(own, expire_on_commit=False, info=info)
        event.listen(self._single_sessions, "before_flush", _refuse_flush)
        # On the units' engine, not their sessions: Core statements sent to the unit's
        # connection (as repositories do, past the ORM) are counted too. On PostgreSQL that
        # engine is the units' own: no other statement pays for an engine event.
        event.listen(own, "before_execute", _refuse_second_statement)
        self._lock_engine: Engine | None = None
        self._lock_engine_made = threading.Lock()

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite(self.url)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """One unit of work: commit on success, roll back on any error."""
        with self._sessions() as session, session.begin():
            yield session

    @contextlib.contextmanager
    def single(self) -> Iterator[Session]:
        """A unit of one statement (a Core insert, update or read). On PostgreSQL it runs in
        autocommit, as its own transaction: no BEGIN and COMMIT round trips, which a click's
        path pays for at every step. On SQLite it is a transaction as any other (where a bulk
        insert may go out as one INSERT per row). Two statements here would not be atomic on
        PostgreSQL, so the ORM's unit of work (which may write several) is refused, and so is
        a second statement: use ``transaction`` for those."""
        with self._single_sessions() as session, session.begin():
            marks = session.connection().info
            marks[_STATEMENTS_RAN] = 0
            try:
                yield session
            finally:
                marks.pop(_STATEMENTS_RAN, None)  # the pooled connection may serve others next

    def ping(self) -> None:
        """Raise unless the database answers a trivial query."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    @property
    def lock_engine(self) -> Engine:
        """PostgreSQL: the advisory locks' own connections (``create_lock_engine``), made on
        first use. SQLite has none: its locks are files."""
        if self.is_sqlite:
            raise RuntimeError("a SQLite store has no advisory locks")
        with self._lock_engine_made:
            if self._lock_engine is None:
                self._lock_engine = create_lock_engine(self.url)
            return self._lock_engine

    def dispose(self) -> None:
        self.engine.dispose()
        with self._lock_engine_made:
            if self._lock_engine is not None:
                self._lock_engine.dispose()


def _refuse_flush(session: Session, _context: Any, _instances: Any) -> None:
    if session.new or session.dirty or session.deleted:
        raise RuntimeError(
            "a Database.single unit cannot flush ORM changes (several statements, not atomic "
            "there); use Database.transaction"
        )


_STATEMENTS_RAN = "single_unit_statements"
"""``Connection.info``, present while the connection serves a ``Database.single`` unit."""


def innermost(session: Session) -> SessionTransaction:
    """The transaction or savepoint the session is in now."""
    current = session.get_nested_transaction() or session.get_transaction()
    assert current is not None, "not in a transaction"
    return current


def in_single_unit(session: Session) -> bool:
    """Whether the session serves a ``Database.single`` unit."""
    return _STATEMENTS_RAN in session.connection().info


def _refuse_second_statement(conn: Connection, *_statement: Any) -> None:
    """Refused on SQLite too (where the unit is a transaction): found there, not in production."""
    ran = conn.info.get(_STATEMENTS_RAN)
    if ran is None:
        return
    if ran:
        raise RuntimeError(
            "a Database.single unit runs one statement (two would not be atomic on "
            "PostgreSQL); use Database.transaction"
        )
    conn.info[_STATEMENTS_RAN] = 1


def affected(result: Result[Any]) -> int:
    """Rows an UPDATE or DELETE touched: a guarded update that touched none lost its race."""
    return typing.cast("CursorResult[Any]", result).rowcount
