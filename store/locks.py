"""Per-thread locks held while a checkpointed thread is verified and resumed.

PostgreSQL: a session advisory lock on a dedicated connection (released by the server if the
process dies). SQLite: an in-process lock plus an ``flock`` on a file beside the database, so two
processes on one host serialise too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from store.db import Database, sqlite_path

logger = logging.getLogger(__name__)
LOCK_NOT_AVAILABLE = "55P03"
_TAKE = {True: text("SELECT pg_advisory_lock(:k)"), False: text("SELECT pg_try_advisory_lock(:k)")}
_LET_GO = text("SELECT pg_advisory_unlock(:k)")
_NO_TIMEOUT = text("RESET lock_timeout")


def _key64(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class ThreadLocks:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._local: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        if self.db.is_sqlite:
            with self._hold_local(key), self._hold_file(key):
                yield
        else:
            with self._hold_advisory(key):
                yield

    @contextlib.contextmanager
    def try_hold(self, key: str) -> Iterator[bool]:
        """Like ``hold``, but never waits: yields False (holding nothing) when another thread or
        process has the lock, so background work skips what is busy instead of queueing on it."""
        if self.db.is_sqlite:
            with self._try_local(key) as local:
                if not local:
                    yield False
                    return
                with self._hold_file(key, wait=False) as held:
                    yield held
        else:
            with self._hold_advisory(key, wait=False) as held:
                yield held

    def try_keep(self, key: str, *, into: contextlib.ExitStack) -> bool:
        """``try_hold``, the lock kept in ``into`` if it was free; if not, or if it could not
        even be tried (e.g. no pooled connection for it), nothing of it is kept: a lock half
        held by this thread (SQLite's in-process part) would keep its own ``hold`` waiting."""
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
        if self.db.is_sqlite:
            deadline = time.monotonic() + seconds
            with self._guard:
                lock = self._local.setdefault(key, threading.Lock())
            if not lock.acquire(timeout=seconds):
                yield False
                return
            try:
                with self._hold_file_until(key, deadline) as held:
                    yield held
            finally:
                lock.release()
        else:
            with self._hold_advisory(key, timeout=seconds) as held:
                yield held

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
    def _try_local(self, key: str) -> Iterator[bool]:
        with self._guard:
            lock = self._local.setdefault(key, threading.Lock())
        if not lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    @contextlib.contextmanager
    def _hold_local(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._local.setdefault(key, threading.Lock())
        with lock:
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
        with self.db.lock_engine.connect() as conn:
            if timeout is not None:
                # The server gives up waiting for the lock after this (SQLSTATE 55P03).
                conn.execute(text(f"SET lock_timeout = '{int(timeout * 1000)}ms'"))
            try:
                answer = conn.execute(_TAKE[wait], {"k": _key64(key)}).scalar()
                got = bool(answer) if not wait else True  # pg_advisory_lock returns nothing
            except OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                    raise
                got = False
            finally:
                if timeout is not None:
                    conn.execute(_NO_TIMEOUT)
            if not got:
                yield False
                return
            try:
                yield True
            finally:
                conn.execute(_LET_GO, {"k": _key64(key)})
