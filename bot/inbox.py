"""Inbox workers: claim stored clicks and submissions and have their decision work done
(``bot.inbox_runner`` works on each claimed item).

Each item is claimed with a lease (renewed while it is worked on) and marked done or failed
afterwards. A worker that dies leaves its lease to run out; another claims the item again, and
the item's id, passed to the engine as the decision's idempotency key, keeps the redo from
recording a second decision. PostgreSQL wakes workers with LISTEN/NOTIFY; SQLite polls.
Claims, renewals and finishes are single statements (``Database.single``): on PostgreSQL each
is its own transaction.
A click this process stores while a worker is idle is stored claimed for it and handed over in
memory (``bot.handoff``): no claiming transaction, the same lease, renewal and finish.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid

import psycopg
from sqlalchemy.engine import make_url

from agent_runtime.faults import fault_point
from bot.handoff import Claimed
from bot.inbox_runner import InboxRunner
from bot.services import BotServices
from store.inbox import INBOX_CHANNEL, InboxRepository, notified_by
from store.inbox_models import InboxItem

logger = logging.getLogger(__name__)
SQLITE_POLL = 0.2
"""Seconds between looks at a SQLite inbox (nothing wakes workers of another process)."""
POSTGRES_POLL = 2.0
"""Seconds between looks on PostgreSQL without a NOTIFY: finds items whose lease ran out."""


class InboxWorkers:
    """``threads`` workers claiming items; on PostgreSQL one more thread LISTENs to wake them."""

    def __init__(self, services: BotServices, *, threads: int, lease: dt.timedelta) -> None:
        self.services = services
        self.db = services.engine.db
        self.threads = threads
        self.lease = lease
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.runner = InboxRunner(services, owner=self.owner, lease=lease)
        self._stop = threading.Event()
        self._settled = threading.Condition()  # notified as each item is done (wait_idle)
        self._running: list[threading.Thread] = []
        self._poll = SQLITE_POLL if self.db.is_sqlite else POSTGRES_POLL

    @property
    def running(self) -> bool:
        return bool(self._running)

    def start(self) -> None:
        if self._running:
            return
        self._stop.clear()
        self.services.doorbell.reopen()
        self.services.handoff.open(owner=self.owner, lease=self.lease)
        for n in range(self.threads):
            self._spawn(self._work_loop, f"inbox-worker-{n}")
        if not self.db.is_sqlite:
            self._spawn(self._listen_loop, "inbox-listen")

    def _spawn(self, target: object, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._running.append(thread)

    def stop(self, *, timeout: float = 30.0) -> None:
        """Claim nothing more; let items being worked on (or handed over) finish."""
        self.services.handoff.close()
        self._stop.set()
        self.services.doorbell.close()
        deadline = time.monotonic() + timeout
        for thread in self._running:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._running.clear()

    def wait_idle(self, timeout: float) -> bool:
        """Until no item is queued or claimed (items stored before this call are done);
        ``False`` on timeout, or if the store cannot be read (shutdown goes on regardless)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.db.transaction() as s:
                    if InboxRepository(s).unfinished() == 0:
                        return True
            except Exception:
                logger.warning("cannot read the inbox; not waiting for it", exc_info=True)
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._settled:
                self._settled.wait(timeout=min(left, self._poll))

    def _work_loop(self) -> None:
        handoff = self.services.handoff
        while not self._stop.is_set():
            try:
                worked = self._run_handed() or self.run_once()
            except Exception:
                logger.exception("inbox worker failed; it goes on")
                worked = False
            if not worked and not self._stop.is_set():
                with handoff.idle():
                    self.services.doorbell.wait(timeout=self._poll)
        self._finish_handed()

    def _finish_handed(self) -> None:
        """Items handed over before the hand-off closed are this pool's to work on."""
        while True:
            try:
                if not self._run_handed():
                    return
            except Exception:
                logger.exception("inbox worker failed; it goes on")

    def _run_handed(self) -> bool:
        """Work on an item the writer stored claimed for this pool; ``False`` if there was none.
        One taken late is worked only if it is still that first claim (kept with a conditional
        update); otherwise another claim has it, or will once its lease runs out."""
        taken = self.services.handoff.take()
        if taken is None:
            return False
        if taken.late:
            with self.db.single() as s:
                kept = InboxRepository(s).keep_handed(
                    taken.item.id, owner=self.owner, lease=self.lease
                )
            if not kept:
                logger.warning(
                    "inbox item %s was handed over too late; left to its lease", taken.item.id
                )
                return True
        self._run(taken.item)
        return True

    def run_once(self) -> bool:
        """Claim one item and work on it; ``False`` if there was none."""
        with self.db.single() as s:
            item = InboxRepository(s).claim_next(owner=self.owner, lease=self.lease)
            claimed = _claimed(item) if item is not None else None
        if claimed is None:
            return False
        self._run(claimed)
        return True

    def _run(self, claimed: Claimed) -> None:
        fault_point("after_ack")
        try:
            self.runner.handle(claimed)
        finally:
            with self._settled:
                self._settled.notify_all()

    def _listen_loop(self) -> None:
        """LISTEN on its own connection; a NOTIFY of items another process stored wakes a
        worker (this process rang for its own as it stored them). Reconnects on error."""
        url = make_url(self.db.url).set(drivername="postgresql")
        dsn = url.render_as_string(hide_password=False)
        own = self.services.writer.origin
        while not self._stop.is_set():
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {INBOX_CHANNEL}")
                    self.services.doorbell.ring()  # items stored while we were not listening
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0, stop_after=1):
                            if notified_by(note.payload) != own:  # ours rang when stored
                                self.services.doorbell.ring()
            except Exception as exc:  # the workers' poll covers the gap
                logger.warning("inbox LISTEN connection failed (%s); retrying", exc)
                self._stop.wait(1.0)


def _claimed(item: InboxItem) -> Claimed:
    """Read inside the claiming transaction."""
    return Claimed(item.id, item.kind, dict(item.payload), item.attempts, item.created_at)
