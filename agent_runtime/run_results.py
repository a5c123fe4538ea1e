"""A finished run's result, told in its thread once: remembered once told (a crash in between
tells it twice), posted by maintenance when a post failed in a way that may pass, and sent to
the requester directly when the thread refuses it for good (an archived channel, a bot removed
from it), with the audit log saying where it went: never tried again at every round."""

from __future__ import annotations

import datetime as dt
import logging

from agent_runtime.errors import Undeliverable
from agent_runtime.faults import fault_point
from agent_runtime.notifier import Notifier
from agent_runtime.views import RunView, run_view
from store.db import Database
from store.maintenance import MaintenanceQueries
from store.models import utcnow
from store.repositories import AuditRepository, RunRepository

logger = logging.getLogger(__name__)

UNDELIVERABLE_EVENT = "result_undeliverable"


class RunResults:
    def __init__(self, *, db: Database, notifier: Notifier) -> None:
        self.db = db
        self.notifier = notifier

    def tell(self, run: RunView) -> bool:
        """Tell the thread, then remember it was told; whether the result is settled (told
        there, or refused there for good and told to the requester if they could be)."""
        fault_point("before_result")
        try:
            self.notifier.run_finished(run)
        except Undeliverable as refused:
            self._told_elsewhere(run, reason=refused.reason)
            return True
        except Exception:
            logger.exception("could not post the result of %s; it is retried later", run.id)
            return False
        with self.db.single() as s:  # one statement: its own transaction on PostgreSQL
            RunRepository(s).mark_result_posted(run.id)
        return True

    def post_missing(self, *, settled_before: dt.datetime) -> int:
        """Results of finished runs that never reached the thread; one replica posts each."""
        with self.db.transaction() as s:
            candidates = MaintenanceQueries(s).results_not_posted(settled_before=settled_before)
        posted = 0
        for run_id in candidates:
            with self.db.transaction() as s:
                won = RunRepository(s).mark_result_posted(run_id)
                run = RunRepository(s).get(run_id) if won else None
                view = run_view(run) if run is not None else None
            if view is None:
                continue
            if self.tell(view):
                posted += 1
            else:  # the mark won this retry; given back, the next reconcile tries again
                with self.db.single() as s:
                    RunRepository(s).forget_result_posted(run_id, at=utcnow())
        return posted

    def _told_elsewhere(self, run: RunView, *, reason: str) -> None:
        """The thread refused the result for good: the requester is told directly (once:
        the mark is written with the audit event), and the audit log keeps the refusal."""
        try:
            self.notifier.run_finished_directly(run, reason=reason)
        except Exception:
            logger.exception("could not tell the requester of %s its result either", run.id)
            told = False
        else:
            logger.warning(
                "the thread of %s refused its result for good (%s): its requester was told "
                "directly",
                run.id,
                reason,
            )
            told = True
        with self.db.transaction() as s:
            RunRepository(s).mark_result_posted(run.id)
            AuditRepository(s).record(
                UNDELIVERABLE_EVENT,
                outcome="error",
                team_id=run.team_id,
                run_id=run.id,
                reason=reason,
                detail={"told_requester": told},
            )
