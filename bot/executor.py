"""Our own pools: slow work (decisions, runs) in a bounded one, and what answers a user in
Slack right after an ack (a modal opened, a page turned) in the listeners' own."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")


class InFlight:
    """Counts tasks started and not yet finished, so shutdown (and tests) can wait for none."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._count = 0

    def begin(self) -> None:
        with self._idle:
            self._count += 1

    def end(self) -> None:
        with self._idle:
            self._count -= 1
            if self._count == 0:
                self._idle.notify_all()

    @property
    def count(self) -> int:
        return self._count

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._count == 0, timeout=timeout)


class BoundedExecutor:
    """At most ``workers`` running and ``queue`` waiting; beyond that ``submit`` says no."""

    def __init__(self, *, workers: int, queue: int, name: str = "approval-worker") -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._name = name
        self._slots = threading.BoundedSemaphore(workers + queue)
        self._tasks = InFlight()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any] | None:
        if not self._slots.acquire(blocking=False):
            logger.warning("%s pool full; refusing %s", self._name, getattr(fn, "__name__", fn))
            return None
        self._tasks.begin()
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
        self._tasks.end()

    @property
    def in_flight(self) -> int:
        return self._tasks.count

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no task runs or waits (used on shutdown to drain)."""
        return self._tasks.wait_idle(timeout)

    def shutdown(self, *, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


LISTENER_THREADS = 16


class ListenerPool(ThreadPoolExecutor):
    """Threads for listeners and what follows their ack, counted, so that it finishes before
    shutdown closes the store. Two of them: Bolt runs each listener in one (it acks there),
    and listeners hand what waits on Slack after their ack (``views.open`` while its trigger
    id lives) to the other (``BotServices.after_ack``): however long Slack takes to open a
    modal, Bolt's threads stay free for the next click's ack."""

    def __init__(self, *, workers: int = LISTENER_THREADS, name: str = "bolt-listener") -> None:
        super().__init__(max_workers=workers, thread_name_prefix=name)
        self._tasks = InFlight()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        self._tasks.begin()
        try:
            return super().submit(self._run, fn, *args, **kwargs)
        except BaseException:
            self._tasks.end()
            raise

    def _run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            self._tasks.end()

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self._tasks.wait_idle(timeout)
