"""Our own bounded worker pool: Bolt's listener threads only ack, the work runs here."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

logger = logging.getLogger(__name__)


class BoundedExecutor:
    """At most ``workers`` running and ``queue`` waiting; beyond that ``submit`` says no."""

    def __init__(self, *, workers: int, queue: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="approval-worker")
        self._slots = threading.BoundedSemaphore(workers + queue)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any] | None:
        if not self._slots.acquire(blocking=False):
            logger.warning("worker pool full; refusing %s", getattr(fn, "__name__", fn))
            return None
        with self._lock:
            self._in_flight += 1
        try:
            return self._pool.submit(self._run, fn, *args, **kwargs)
        except RuntimeError:
            self._done()
            return None

    def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception:
            logger.exception("background task %s failed", getattr(fn, "__name__", fn))
            return None
        finally:
            self._done()

    def _done(self) -> None:
        self._slots.release()
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no task runs or waits (used on shutdown to drain)."""
        with self._lock:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout)

    def shutdown(self, *, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
