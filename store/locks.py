"""Per-thread locks held while a checkpointed thread is verified and resumed.

A key's lock in this process first, then one between processes. PostgreSQL: a session advisory
lock on a connection of the locks' own (released by the server if the process dies). SQLite: an
``flock`` on a file beside the database, so two processes on one host serialise too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from store.db import Database
from store.engines import sqlite_path

logger = logging.getLogger(__name__)
LOCK_NOT_AVAILABLE = "55P03"
_TAKE = {True: text("SELECT pg_advisory_lock(:k)"), False: text("SELECT pg_try_advisory_lock(:k)")}
_LET_GO = text("SELECT pg_advisory_unlock(:k)")
_NO_TIMEOUT = text("RESET lock_timeout")


def _key64(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


@dataclass
class _Local:
    """A key's lock in this process, and how many threads hold or want it (at 0 it goes)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0


class ThreadLocks:
    """A run's thread lock, across threads and processes. A thread first takes the key's lock
    in this process (so the threads of one process that want one run's lock wait here, not each
    on a connection or a file of its own), then the one between processes: a PostgreSQL
    advisory lock on a connection of the locks' own (``Database.lock_engine``), or a file lock
    beside a SQLite store."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._local: dict[str, _Local] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._hold_local(key):
            if self.db.is_sqlite:
                with self._hold_file(key):
                    yield
            else:
                with self._hold_advisory(key):
                    yield

    @contextlib.contextmanager
    def try_hold(self, key: str) -> Iterator[bool]:
        """Like ``hold``, but never waits: yields False (holding nothing) when another thread or
        process has the lock, so background work skips what is busy instead of queueing on it."""
        with contextlib.ExitStack() as taken:
            local = taken.enter_context(self._try_local(key))
            if local and taken.enter_context(self._across(key, timeout=0.0)):
                yield True
                return
            taken.close()  # holding nothing while the caller goes on
            yield False

    def try_keep(self, key: str, *, into: contextlib.ExitStack) -> bool:
        """``try_hold``, the lock kept in ``into`` if it was free; if not, or if it could not
        even be tried (e.g. no connection for it), nothing of it is kept: a lock half held by
        this thread (its in-process part) would keep its own ``hold`` waiting."""
        attempt = contextlib.ExitStack()
        try:
            taken = attempt.enter_context(self.try_hold(key))
        except Exception:
            logger.exception("could not try the lock of %s", key)
            return False
        if taken:
            into.push(attempt)
            return True
        attempt.close()
        return False

    @contextlib.contextmanager
    def hold_within(self, key: str, seconds: float) -> Iterator[bool]:
        """Like ``hold``, but waits at most ``seconds``: yields False (holding nothing) if the
        lock is still taken then, so a user's request is answered instead of queueing behind
        a long step of the run."""
        deadline = time.monotonic() + max(0.0, seconds)
        with contextlib.ExitStack() as taken:
            local = taken.enter_context(self._local_of(key))
            if local.lock.acquire(timeout=max(0.0, seconds)):
                taken.callback(local.lock.release)
                left = max(0.0, deadline - time.monotonic())
                if taken.enter_context(self._across(key, timeout=left)):
                    yield True
                    return
            taken.close()  # holding nothing while the caller goes on
            yield False

    def _across(self, key: str, *, timeout: float) -> contextlib.AbstractContextManager[bool]:
        """The lock between processes, waited for up to ``timeout`` seconds (0: not at all)."""
        if self.db.is_sqlite:
            return self._hold_file_until(key, time.monotonic() + timeout)
        if timeout <= 0:
            return self._hold_advisory(key, wait=False)
        return self._hold_advisory(key, timeout=timeout)

    @contextlib.contextmanager
    def _hold_file_until(self, key: str, deadline: float) -> Iterator[bool]:
        """The file lock, tried until ``deadline`` (``flock`` itself cannot time out)."""
        while True:
            with self._hold_file(key, wait=False) as held:
                if held or time.monotonic() >= deadline:
                    yield held
                    return
            time.sleep(0.05)

    @contextlib.contextmanager
    def _local_of(self, key: str) -> Iterator[_Local]:
        """The key's lock in this process, counted as used by this thread meanwhile."""
        with self._guard:
            local = self._local.setdefault(key, _Local())
            local.users += 1
        try:
            yield local
        finally:
            with self._guard:
                local.users -= 1
                if not local.users:
                    del self._local[key]

    @contextlib.contextmanager
    def _try_local(self, key: str) -> Iterator[bool]:
        with self._local_of(key) as local:
            if not local.lock.acquire(blocking=False):
                yield False
                return
            try:
                yield True
            finally:
                local.lock.release()

    @contextlib.contextmanager
    def _hold_local(self, key: str) -> Iterator[None]:
        with self._local_of(key) as local, local.lock:
            yield

    @contextlib.contextmanager
    def _hold_file(self, key: str, *, wait: bool = True) -> Iterator[bool]:
        folder = Path(sqlite_path(self.db.url) + ".locks")
        folder.mkdir(exist_ok=True)
        path = folder / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock")
        with path.open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _hold_advisory(
        self, key: str, *, wait: bool = True, timeout: float | None = None
    ) -> Iterator[bool]:
        """The advisory lock, on a connection of the locks' own. A connection that failed
        while it may hold the lock is thrown away, never handed back to the pool holding it
        (a session's advisory locks outlive any rollback; the next taker would be let in)."""
        conn = self.db.lock_engine.connect()
        try:
            got = _take(conn, key, wait=wait, timeout=timeout)
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        if not got:
            conn.close()  # not kept through the caller's body
            yield False
            return
        try:
            yield True
        finally:
            try:
                conn.execute(_LET_GO, {"k": _key64(key)})
            except Exception:
                # Thrown away, the server frees the lock: the caller's work stands.
                logger.warning("could not let go of the lock of %s", key, exc_info=True)
                conn.invalidate()
            except BaseException:
                conn.invalidate()
                raise
            finally:
                conn.close()


def _take(conn: Connection, key: str, *, wait: bool, timeout: float | None) -> bool:
    if timeout is not None:
        # The server gives up waiting for the lock after this (SQLSTATE 55P03); 0 would mean
        # never.
        conn.execute(text(f"SET lock_timeout = '{max(1, int(timeout * 1000))}ms'"))
    try:
        answer = conn.execute(_TAKE[wait], {"k": _key64(key)}).scalar()
        return bool(answer) if not wait else True  # pg_advisory_lock returns nothing
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        return False
    finally:
        if timeout is not None:
            conn.execute(_NO_TIMEOUT)
