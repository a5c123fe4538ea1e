"""A run's thread lock held by another thread, for as long as a test needs it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from store.locks import ThreadLocks


@contextlib.contextmanager
def held_by_another_thread(locks: ThreadLocks, key: str) -> Iterator[threading.Event]:
    """Another thread holds ``key`` until the yielded event is set (or the block ends)."""
    held, done = threading.Event(), threading.Event()

    def holder() -> None:
        with locks.hold(key):
            held.set()
            done.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        yield done
    finally:
        done.set()
        thread.join(30)
