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
    """The one owner of telling a finished run's result, on the click's path and in
    maintenance alike."""

    def __init__(self, *, db: Database, notifier: Notifier) -> None:
        self.db = db
        self.notifier = notifier

    def tell(self, run: RunView, *, marked: bool = False) -> bool:
        """Tell the thread, then remember it was told; whether the result is settled (told
        there, or refused there for good and told to the requester if they can be).
        ``marked``: the caller already won the mark (a retry by maintenance)."""
        fault_point("before_result")
        try:
            self.notifier.run_finished(run)
        except Undeliverable as refused:
            return self._told_elsewhere(run, reason=refused.reason, marked=marked)
        except Exception:
            logger.exception("could not post the result of %s; it is retried later", run.id)
            return False
        if not marked:
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
            if self.tell(view, marked=True):
                posted += 1
            else:  # the mark won this retry; given back, the next reconcile tries again
                with self.db.single() as s:
                    RunRepository(s).forget_result_posted(run_id, at=utcnow())
        return posted

    def _told_elsewhere(self, run: RunView, *, reason: str, marked: bool) -> bool:
        """The thread refused the result for good: the requester is told directly, and the
        audit log keeps the refusal, with whether they were told. A direct message that
        failed in a way that may pass is tried again with the thread, later: not settled.
        The event is written by whoever wins the mark (maintenance may have, meanwhile)."""
        refused_directly: str | None = None
        try:
            self.notifier.run_finished_directly(run, reason=reason)
        except Undeliverable as unreachable:
            refused_directly = unreachable.reason
        except Exception:
            logger.exception("could not tell the requester of %s its result; retried later", run.id)
            return False
        logger.warning(
            "the thread of %s refused its result for good (%s); its requester was %s",
            run.id,
            reason,
            "told directly" if refused_directly is None else f"not told ({refused_directly})",
        )
        detail: dict[str, object] = {"told_requester": refused_directly is None}
        if refused_directly is not None:
            detail["direct_refusal"] = refused_directly
        with self.db.transaction() as s:
            if RunRepository(s).mark_result_posted(run.id) or marked:
                AuditRepository(s).record(
                    UNDELIVERABLE_EVENT,
                    outcome="error",
                    team_id=run.team_id,
                    run_id=run.id,
                    reason=reason,
                    detail=detail,
                )
        return True
