"""Engines and sessions for the one database that holds the store and the checkpointer."""

from __future__ import annotations

import contextlib
import os
import threading
import typing
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, event, text
from sqlalchemy.engine import Connection, CursorResult, Result, make_url
from sqlalchemy.exc import DataError, DBAPIError, StatementError
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

from store.engines import (
    DatabaseUrlError,
    create_db_engine,
    create_lock_engine,
    is_sqlite,
    sqlite_path,
)

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


class DatabaseUnavailableError(RuntimeError):
    """The database in DATABASE_URL cannot be reached or opened; the message is one line."""


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


def refused_for_content(exc: BaseException) -> bool:
    """Whether a failed write was refused for what it holds (a value the database or the JSON
    encoder will not take), not for the database being unreachable or busy: trying it again
    as it is would fail again."""
    if isinstance(exc, StatementError) and not isinstance(exc, DBAPIError):
        exc = exc.orig if exc.orig is not None else exc
    return isinstance(exc, (DataError, ValueError, TypeError))
