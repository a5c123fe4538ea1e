"""The engine's background rounds: expiry, reminders and digests (``sweep``), and finishing
what dead processes left (``reconcile``). Resuming and carrying a run on stay the façade's,
ending a stalled run the run lifecycle's: they are handed in, called under the run's lock as
the façade calls them."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from agent_runtime.announcer import Announcer
from agent_runtime.claims import Claims
from agent_runtime.give_ups import GiveUps, gave_up_text
from agent_runtime.run_end import close_left_open
from agent_runtime.sweeper import Sweeper, SweepResult
from store.db import Database
from store.locks import ThreadLocks
from store.maintenance import MaintenanceQueries
from store.repositories import RunRepository

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileResult:
    """What one round of reconciling finished of the work dead processes left."""

    resumed: int
    advanced: int
    cards: int
    results: int
    cards_posted: int = 0
    digests: int = 0
    """Digests posted again (after a lost answer) or redrawn."""
    closed: int = 0
    """Approvals closed because their run had ended without closing them."""


class Background:
    def __init__(
        self,
        *,
        db: Database,
        locks: ThreadLocks,
        claims: Claims,
        sweeper: Sweeper,
        announcer: Announcer,
        clock: Callable[[], dt.datetime],
        card_retry_after: dt.timedelta,
        resume: Callable[..., None],
        carry_on: Callable[[str], None],
        give_up: Callable[[str, str], None],
        rounds_every: dt.timedelta,
    ) -> None:
        """``resume(request_id, recovering=...)``: resume one request, never raising;
        ``carry_on(run_id)``: record where a run stopped, under its lock (held by the caller);
        ``give_up(run_id, reason)``: end a stalled run, failed, telling its thread why;
        ``rounds_every``: how often maintenance runs its rounds."""
        self.db = db
        self.locks = locks
        self.claims = claims
        self.sweeper = sweeper
        self.announcer = announcer
        self.clock = clock
        self.card_retry_after = card_retry_after
        self.resume = resume
        self.carry_on = carry_on
        self.give_up = give_up
        # A run put back is tried again once settled: about a lease and a round later.
        self.give_ups = GiveUps(clock=clock, every=4 * (claims.lease + rounds_every))

    def sweep(self) -> SweepResult:
        """Expire what is due (each resumed, rejected, as soon as it is claimed), then send
        due reminders, then post the digests that are due (after expiry: nothing expired is
        listed)."""
        expired = 0
        for request_id in self.sweeper.expire_due():
            expired += 1
            self.resume(request_id)
        return SweepResult(
            expired=expired,
            reminded=self.sweeper.remind_due(),
            digests=self.announcer.post_digests(),
        )

    def reconcile(self) -> ReconcileResult:
        """Finish what dead processes left, at start-up and periodically; safe with several
        replicas (each step is won by one of them)."""
        resumed = 0
        for request_id in self.claims.take_over_stale():
            resumed += 1
            self.resume(request_id, recovering=True)
        closed = self._close_left_open()  # before any card of theirs is posted or redrawn
        return ReconcileResult(
            resumed=resumed,
            advanced=self._advance_stalled_runs(),
            cards_posted=self.announcer.retry_card_posts(
                created_before=self.clock() - self.card_retry_after
            ),
            cards=self.announcer.repair_cards(),
            results=self.announcer.post_missing_results(
                settled_before=self.claims.settled_before()
            ),
            digests=self.announcer.repair_digests(),
            closed=closed,
        )

    def _carry_on_or_give_up(self, run_id: str, *, settled_before: dt.datetime) -> bool:
        """Carry a stalled run on, under its lock; whether it was. One whose carrying on has
        failed at every try for long (``GiveUps``) ends instead, its thread told, if it is
        still stalled as the round found it (a try that got as far as an approval, or a
        resume, moved it on)."""
        try:
            self.carry_on(run_id)
        except Exception as exc:
            if not self.give_ups.failed(run_id, exc):
                raise
            with self.db.transaction() as s:
                still = MaintenanceQueries(s).is_stalled(run_id, settled_before=settled_before)
            if not still:
                self.give_ups.forget(run_id)
                raise
            logger.exception("the stalled run %s could not be carried on for long", run_id)
            self.give_up(run_id, gave_up_text())
            self.give_ups.forget(run_id)
            logger.error("the stalled run %s ended: it could not be carried on", run_id)
            return False
        self.give_ups.forget(run_id)
        return True

    def _put_back(self, run_id: str) -> None:
        """To the back of the line, after the others (best effort: not put back, it is only
        tried again sooner)."""
        try:
            with self.db.single() as s:
                RunRepository(s).put_back(run_id, at=self.clock())
        except Exception:
            logger.exception("could not put the stalled run %s back", run_id)

    def _close_left_open(self) -> int:
        """Approvals left pending by a run that ended (by an older version, which did not
        close them with it): closed under the run's lock, as every end of a run."""
        with self.db.transaction() as s:
            ended = MaintenanceQueries(s).ended_with_pending()
        closed = 0
        for run_id in ended:
            try:
                with self.locks.hold(run_id), self.db.transaction() as s:
                    cards = close_left_open(s, run_id)
            except Exception:  # as for stalled runs: one must not stop the rest
                logger.exception("could not close what %s left open; trying again later", run_id)
                continue
            self.announcer.show_cards(cards)
            closed += len(cards)
        return closed

    def _advance_stalled_runs(self) -> int:
        """Runs left waiting or running with no open approval: a process died before it
        recorded what came next (a new interrupt, or the result), before it started the
        agent, or before it posted the run's thread. One whose lock is held is at work (or
        still posting its thread): left for a later round."""
        settled_before = self.claims.settled_before()
        self.give_ups.prune()
        with self.db.transaction() as s:
            stalled = MaintenanceQueries(s).stalled_runs(settled_before=settled_before)
        advanced = 0
        for run_id in stalled:
            try:
                with self.locks.try_hold(run_id) as held:
                    if not held:
                        continue
                    with self.db.transaction() as s:
                        still = MaintenanceQueries(s).is_stalled(
                            run_id, settled_before=settled_before
                        )
                    if still and self._carry_on_or_give_up(run_id, settled_before=settled_before):
                        advanced += 1
            except Exception:  # one run must not keep the others, or the steps after, waiting
                logger.exception("could not advance the stalled run %s; trying again later", run_id)
                self._put_back(run_id)
        return advanced
