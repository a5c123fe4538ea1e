"""Finishes what a dead process left, at start-up and periodically; safe with several replicas.

- An approval still ``resuming`` after its owner's lease ran out is taken over (one taker wins)
  and resumed again; if the checkpoint shows the resume already happened, its outcome is read
  from the checkpoint and recorded.
- A pending approval whose card never got a reference (the post failed, or Slack took it and
  the answer was lost) gets its card: found in the run's thread and adopted, else posted again.
- Cards whose Slack message shows an older status are re-rendered.
- Finished runs whose result never reached the thread are posted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import or_, select

from agent_runtime import resume
from agent_runtime.views import approval_view, run_view
from store.models import ApprovalRequest, Run
from store.repositories import ApprovalRepository, AuditRepository, RunRepository

if TYPE_CHECKING:
    from agent_runtime.engine import ApprovalEngine

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileResult:
    resumed: int
    advanced: int
    cards: int
    results: int
    cards_posted: int = 0


class Reconciler:
    def __init__(self, engine: ApprovalEngine) -> None:
        self.engine = engine

    def run_once(self) -> ReconcileResult:
        return ReconcileResult(
            resumed=self._take_over_stale_claims(),
            advanced=self._advance_stalled_runs(),
            cards_posted=self._retry_card_posts(),
            cards=self._repair_cards(),
            results=self._post_missing_results(),
        )

    def _retry_card_posts(self) -> int:
        """Under the run's thread lock, which the first poster holds until it is done: never
        while that post is under way, and one process at a time. Busy runs wait for next time."""
        engine = self.engine
        due = engine.clock() - engine.card_retry_after
        with engine.db.transaction() as s:
            missing = ApprovalRepository(s).without_card(created_before=due)
        done = 0
        for request_id, run_id in missing:
            with engine.locks.try_hold(run_id) as held:
                if held:
                    engine.post_card(request_id, look_first=True)
                    done += 1
        return done

    def _advance_stalled_runs(self) -> int:
        """A run left waiting with no open approval: its last resume finished but the process
        died before recording what came next (a new interrupt, or the result)."""
        engine = self.engine
        settled = engine.clock() - engine.lease
        open_requests = select(ApprovalRequest.run_id).where(
            ApprovalRequest.status.in_(("pending", "resuming"))
        )
        with engine.db.transaction() as s:
            stalled = list(
                s.scalars(
                    select(Run.id)
                    .where(
                        Run.status == "waiting",
                        Run.updated_at <= settled,
                        Run.id.not_in(open_requests),
                    )
                    .limit(100)
                )
            )
        for run_id in stalled:
            with engine.locks.hold(run_id):
                with engine.db.transaction() as s:
                    still = s.scalar(select(Run.status).where(Run.id == run_id)) == "waiting"
                    open_now = s.scalar(
                        select(ApprovalRequest.id)
                        .where(
                            ApprovalRequest.run_id == run_id,
                            ApprovalRequest.status.in_(("pending", "resuming")),
                        )
                        .limit(1)
                    )
                if still and open_now is None:
                    engine.advance(run_id)
        return len(stalled)

    def _take_over_stale_claims(self) -> int:
        engine = self.engine
        now = engine.clock()
        with engine.db.transaction() as s:
            stale = list(
                s.scalars(
                    select(ApprovalRequest.id).where(
                        ApprovalRequest.status == "resuming",
                        ApprovalRequest.claim_expires_at <= now,
                    )
                )
            )
        done = 0
        for request_id in stale:
            with engine.db.transaction() as s:
                won = ApprovalRepository(s).take_over(
                    request_id, owner=engine.owner, now=now, lease=engine.lease
                )
                if won:
                    AuditRepository(s).record(
                        "resume_taken_over",
                        request_id=request_id,
                        detail={"owner": engine.owner},
                    )
            if not won:
                continue
            with engine.db.transaction() as s:
                request = ApprovalRepository(s).get(request_id)
                expired = request is not None and any(
                    a.outcome == "expired" for a in request.actions
                )
            resume.resume(
                engine,
                request_id,
                final_status="expired" if expired else "resolved",
                recovering=True,
            )
            done += 1
        return done

    def _repair_cards(self) -> int:
        engine = self.engine
        with engine.db.transaction() as s:
            stale = list(
                s.scalars(
                    select(ApprovalRequest)
                    .where(
                        ApprovalRequest.card_ts.is_not(None),
                        ApprovalRequest.status != "resuming",
                        or_(
                            ApprovalRequest.card_status.is_(None),
                            ApprovalRequest.card_status != ApprovalRequest.status,
                        ),
                    )
                    .limit(100)
                )
            )
            views = [approval_view(r) for r in stale]
        for view in views:
            engine.show_card(view)
        return len(views)

    def _post_missing_results(self) -> int:
        engine = self.engine
        settled = engine.clock() - engine.lease
        with engine.db.transaction() as s:
            candidates = list(
                s.scalars(
                    select(Run.id)
                    .where(
                        Run.status.in_(("completed", "failed")),
                        Run.result_posted.is_(False),
                        Run.updated_at <= settled,
                    )
                    .limit(100)
                )
            )
        posted = 0
        for run_id in candidates:
            with engine.db.transaction() as s:
                won = RunRepository(s).claim_result_post(run_id)
                run = RunRepository(s).get(run_id) if won else None
                view = run_view(run) if run is not None else None
            if view is not None:
                engine.post_result(view)
                posted += 1
        return posted
