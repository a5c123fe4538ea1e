"""Resuming a claimed approval exactly once: verify the checkpoint, validate, resume, record.

The winner of the claim resumes inside the run's thread lock, after checking that the checkpoint
still holds the very interrupt that was decided, with the very actions that were reviewed. The
resumer reports what happened (``Resumed``) and never goes on by itself: what follows a resume
(new approvals, telling the thread its result, a failed run) is the caller's to do. A resume
that ended the run records the run's end with the request's, in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from agent_runtime import evidence, resume_checks
from agent_runtime.announcer import Announcer
from agent_runtime.cancel import CANCELLED_OUTCOME
from agent_runtime.claims import Claims
from agent_runtime.errors import InvalidDecisions
from agent_runtime.faults import fault_point
from agent_runtime.policy import Policy
from agent_runtime.resume_records import (
    audit_request_end,
    record_tool_outcomes,
    resume_decisions,
    summary,
)
from agent_runtime.run_end import Told, audit_run_end, ended_with
from agent_runtime.runtime import AgentRuntime, ThreadStop
from agent_runtime.views import RunView, approval_view
from agent_runtime.wire import build_resume, final_text
from store.claim_repository import ClaimRepository
from store.db import Database
from store.models import ApprovalRequest
from store.repositories import ApprovalRepository
from store.statuses import FINISHED_RUN, ActionOutcome, RequestStatus, RunStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resumed:
    """What a resume left for its caller: the thread's state to record (new interrupts), or
    the run it ended with the request (to tell its thread; ``run_failed`` says why, if it
    failed), or nothing (not ours, or closed, or its run had already ended)."""

    after: ThreadStop | None = None
    ended: RunView | None = None
    run_failed: str | None = None


NOTHING = Resumed()
RUN_ENDED_OUTCOME = "its run has already ended"


class Resumer:
    def __init__(
        self,
        *,
        db: Database,
        runtime: AgentRuntime,
        policy: Policy,
        claims: Claims,
        announcer: Announcer,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.policy = policy
        self.claims = claims
        self.announcer = announcer

    def resume(
        self,
        request_id: str,
        *,
        recovering: bool = False,
        claimed: ApprovalRequest | None = None,
        unchanged: bool = False,
    ) -> Resumed:
        """Resume the thread of a request this process claimed, once, after checking the
        checkpoint. The caller holds the run's thread lock.

        ``recovering``: a process that claimed this request died. If the checkpoint no longer
        waits on the interrupt, that process got as far as resuming it: finish what it started
        (an interrupted step is continued; the gate's execution records keep tools from
        repeating effects), then ask the evidence whether each approved action ran before
        calling the request resolved. The same holds, without a crash, for an interrupt that
        someone resumed elsewhere (directly on LangGraph Server) once this one was claimed:
        what ran is told, never denied.

        ``claimed``: the request as the decision that claimed it read it, under its row lock;
        used as it is only while its claim and its run are still as that read left them;
        ``unchanged``: they are, as the caller knows (it took the run's lock before the claim
        was committed), and they are not looked at again."""
        request = self._current(request_id, claimed, unchanged=unchanged)
        if request is not None and _cancelled(request):
            return self._cancelled(request)
        if request is None or not self.claims.held(request):
            return NOTHING
        fault_point("after_claim")
        if request.run.status in FINISHED_RUN:
            return self._after_its_run_ended(request, recovering=recovering)
        before = self.runtime.state(request.run_id)
        catalog = self.runtime.catalog
        problem, pending = resume_checks.problem(
            request, before, recovering=recovering, db=self.db, policy=self.policy, catalog=catalog
        )
        if problem is not None:
            closed = self._finish(request, status=RequestStatus.INVALIDATED, outcome=problem)
            return NOTHING if closed is None else Resumed(ended=closed, run_failed=problem)
        after: ThreadStop | None = None
        try:
            with self.claims.kept(request_id):
                if pending is not None:
                    command = build_resume(pending, resume_decisions(request, self.policy))
                    after = self.runtime.invoke(command, request.run_id)
                elif before.next and not before.interrupts:
                    after = self.runtime.invoke(None, request.run_id)  # the interrupted step
        except InvalidDecisions as exc:  # nothing will ever resume that interrupt
            reason = f"The agent could not be resumed: {exc}"
            return self._run_failed(request, outcome=f"not resumed: {exc}", reason=reason)
        except Exception as exc:
            logger.exception("resume of %s failed", request_id)
            failure = f"{type(exc).__name__}: {exc}"
            return self._run_failed(
                request, outcome=failure, reason=f"The agent failed after the decision: {exc}"
            )
        fault_point("after_resume")
        if after is None:  # nothing was left to run, or the run did not tell where it stopped
            after = self.runtime.state(request.run_id)
        if pending is None:
            found = evidence.gaps(self.db, request, state=after)
            if found:
                return self._unconfirmed(request, state=after, found=found)
        expired = any(a.outcome == ActionOutcome.EXPIRED for a in request.actions)
        over = not after.interrupts  # the run's end is then committed with the request's
        ended = self._finish(
            request,
            status=RequestStatus.EXPIRED if expired else RequestStatus.RESOLVED,
            outcome=summary(request),
            record=lambda s: record_tool_outcomes(s, request, after, policy=self.policy),
            run_end=(RunStatus.COMPLETED, final_text(after.values)) if over else None,
        )
        # Not closed here (a cancel, or a taker of the claim, ended it first): neither is its
        # run, which whoever closed the request ended with it.
        return Resumed(ended=ended) if over else Resumed(after=after)

    def _run_failed(
        self,
        request: ApprovalRequest,
        *,
        outcome: str,
        reason: str,
        record: Callable[[Session], None] | None = None,
    ) -> Resumed:
        """Close the request as failed and end its run with ``reason``, in one commit."""
        ended = self._finish(
            request,
            status=RequestStatus.FAILED,
            outcome=outcome,
            record=record,
            run_end=(RunStatus.FAILED, reason),
        )
        return Resumed(ended=ended, run_failed=reason)

    def _current(
        self, request_id: str, claimed: ApprovalRequest | None, *, unchanged: bool = False
    ) -> ApprovalRequest | None:
        """The request now. Once claimed, nothing changes its actions or decisions (they are
        taken only while it is pending): what may have changed since ``claimed`` was read is
        its claim (taken over), its run (cancelled or ended), and its card's reference and
        status. One short read tells the first two; ``_finish`` takes the card's reference
        from the row it closes, and the status it wrote. That read is one statement: its own
        transaction, with no BEGIN and COMMIT on the click's path."""
        if claimed is not None and claimed.id == request_id:
            if unchanged:
                return claimed
            with self.db.single() as s:
                now = ClaimRepository(s).claim_state(request_id)
            if now == (claimed.status, claimed.claimed_by, claimed.run.status):
                return claimed
        with self.db.transaction() as s:
            return ApprovalRepository(s).get(request_id)

    def _after_its_run_ended(self, request: ApprovalRequest, *, recovering: bool) -> Resumed:
        """Its run ended (e.g. another approval's resume failed it) before this was resumed:
        the thread is never moved again. What a process that died resuming it delivered is
        told, never denied: a call that spent an approval, or the decisions themselves (its
        interrupt no longer waits); the evidence says what ran."""
        spent = evidence.spent(self.db, request)
        state = self.runtime.state(request.run_id) if spent or recovering else None
        if state is None or (not spent and resume_checks.still_waits(state, request)):
            self._finish(request, status=RequestStatus.INVALIDATED, outcome=RUN_ENDED_OUTCOME)
            return NOTHING
        found = evidence.gaps(self.db, request, state=state)

        def record(s: Session) -> None:
            record_tool_outcomes(s, request, state, policy=self.policy)
            evidence.record(s, request, found=found)

        expired = any(a.outcome == ActionOutcome.EXPIRED for a in request.actions)
        ended = RequestStatus.EXPIRED if expired else RequestStatus.RESOLVED
        self._finish(
            request,
            status=RequestStatus.FAILED if found else ended,
            outcome=evidence.describe(found) if found else summary(request),
            record=record,
        )
        return NOTHING

    def _unconfirmed(
        self, request: ApprovalRequest, *, state: ThreadStop, found: list[evidence.Gap]
    ) -> Resumed:
        """An approved action left no proof of having run: say so everywhere, never
        "resumed"."""
        text = evidence.describe(found)

        def record(s: Session) -> None:
            record_tool_outcomes(s, request, state, policy=self.policy)
            evidence.record(s, request, found=found)

        reason = f"The run was interrupted by a restart: {text}"
        return self._run_failed(request, outcome=text, reason=reason, record=record)

    def _cancelled(self, request: ApprovalRequest) -> Resumed:
        """Its run was cancelled (read under the run's lock): never resume it. A request the
        cancel did not close is closed now, if still resuming (one that a taker of its claim
        ended first keeps that end, and the card its taker drew). A cancelled one's card is
        drawn again: a decision drawn just before the cancel may have been shown after it."""
        if request.status != RequestStatus.CANCELLED:
            self._finish(request, status=RequestStatus.CANCELLED, outcome=CANCELLED_OUTCOME)
        else:
            self.announcer.show_card(approval_view(request))
        return NOTHING

    def invalidate(self, request_id: str, *, reason: str) -> None:
        """Close a pending request without resuming it (e.g. the policy changed): the card
        says so and the run's thread is told. One caller wins the claim; the others do
        nothing. The caller holds the run's thread lock, as for every end of a run."""
        with self.db.transaction() as s:
            if not self.claims.claim(s, request_id):
                return
            request = ApprovalRepository(s).get(request_id)
        assert request is not None  # claimed, in the same transaction
        closed = self._finish(request, status=RequestStatus.INVALIDATED, outcome=reason)
        if closed is not None:
            self.announcer.run_finished(closed)

    def _finish(
        self,
        request: ApprovalRequest,
        *,
        status: RequestStatus,
        outcome: str,
        record: Callable[[Session], None] | None = None,
        run_end: tuple[RunStatus, str] | None = None,
    ) -> RunView | None:
        """Record the request's end, with its run's (``run_end``: status and text) when the
        resume ended the run or the request closed unresumed, then show it on the card.
        ``request``: as read at or after its claim; its actions and decisions no longer
        change, so it is not read again: the card is drawn from it, where the row says the
        card is now. ``record``: more to write in the same commit. Returns the run it ended,
        if any, for the caller to tell its thread; the run's other pending approvals, closed
        with its end, have their cards drawn here."""
        if status == RequestStatus.INVALIDATED:
            run_end = (RunStatus.FAILED, outcome)  # closed unresumed: its run ends with it
        with self.db.transaction() as s:
            # Lock order everywhere: the request's row, then the run's, then the audit chain.
            closed = ApprovalRepository(s).close(
                request.id, status=status, outcome=outcome, run_end=run_end
            )  # with its run's end, and the run's other pending approvals locked, if it ends
            if closed is None:
                return None  # a cancel, or a taker of the claim, closed it first: that stands
            ended = ended_with(s, closed, request.run_id) if run_end is not None else None
            if record is not None:
                record(s)
            audit_request_end(s, request, status=status, outcome=outcome, policy=self.policy)
            told: Told | None = None
            if ended is not None:  # an invalidation's own event says why its run ended
                run_event = status != RequestStatus.INVALIDATED
                told = audit_run_end(s, ended, policy=self.policy, with_run_event=run_event)
        fault_point("before_card_update")
        closed_run = told.run if told is not None else None
        drawn = approval_view(request)
        view = replace(
            drawn,
            status=status,
            outcome=outcome,
            card_channel=closed.card.channel,
            card_ts=closed.card.ts,
            run=closed_run if closed_run is not None else drawn.run,
        )
        self.announcer.show_card(view)
        self.announcer.show_cards(told.cards if told is not None else ())
        return closed_run


def _cancelled(request: ApprovalRequest) -> bool:
    return request.status == RequestStatus.CANCELLED or request.run.status == RunStatus.CANCELLED
