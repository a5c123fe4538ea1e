"""The approval engine's façade: the only orchestrator between its owners, which are created
together in ``owners`` (listed there), each with just its collaborators, and call none of the
others back."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.background import ReconcileResult
from agent_runtime.cancel import CancelOutcome, CancelResult
from agent_runtime.decisions import Attempt, DecisionResult
from agent_runtime.facade_attempts import REDRAWN, FacadeAttempts
from agent_runtime.facade_reads import FacadeReads
from agent_runtime.faults import fault_point
from agent_runtime.notifier import MessageRef, Notifier
from agent_runtime.observe import ResumeObserver, Unobserved, observed
from agent_runtime.owners import build_owners
from agent_runtime.policy import Policy
from agent_runtime.runtime import AgentRuntime, ThreadStop
from agent_runtime.sweeper import SweepResult
from agent_runtime.views import ApprovalView, RunView
from store.db import Database
from store.models import ApprovalRequest, utcnow
from store.repositories import ApprovalRepository

__all__ = ["ApprovalEngine", "CancelResult", "DecisionResult", "ReconcileResult", "SweepResult"]

logger = logging.getLogger(__name__)


def _no_groups(_group: str) -> frozenset[str]:
    return frozenset()


CANCEL_WAIT_SECONDS = 5.0
"""How long a cancel waits for a run that is working (a resume, the agent, a tool) to stop at
its next wait; longer, and the user is asked to try again."""


class ApprovalEngine(FacadeReads, FacadeAttempts):
    """Runs, interrupts, authorized decisions and the exactly-once resume, for the bot (its
    reads, which orchestrate nothing, come from ``FacadeReads``; its record of attempts that
    decided nothing from ``FacadeAttempts``)."""

    def __init__(
        self,
        *,
        db: Database,
        runtime: AgentRuntime,
        policy: Policy,
        notifier: Notifier,
        usergroup_members: Callable[[str], frozenset[str]] = _no_groups,
        clock: Callable[[], dt.datetime] = utcnow,
        lease: dt.timedelta = dt.timedelta(minutes=10),
        card_retry_after: dt.timedelta = dt.timedelta(seconds=10),
        resuming_card_after: dt.timedelta = dt.timedelta(0),
        observer: ResumeObserver | None = None,
        rounds_every: dt.timedelta = dt.timedelta(seconds=30),
    ) -> None:
        """``card_retry_after``: how old a request without a card must be before
        ``reconcile`` looks for its card or posts it again; ``resuming_card_after``: how long
        a resume may take before its card says it is under way (one that ends sooner updates
        the card once, with its result); ``rounds_every``: how often ``sweep`` and
        ``reconcile`` run."""
        self.db = db
        self.clock = clock
        self.observer = observer or Unobserved()
        self.card_retry_after = card_retry_after
        self.resuming_card_after = resuming_card_after
        owners = build_owners(
            db=db,
            runtime=runtime,
            policy=policy,
            notifier=notifier,
            usergroup_members=usergroup_members,
            clock=clock,
            lease=lease,
            card_retry_after=card_retry_after,
            rounds_every=rounds_every,
            resume=self._resume_guarded,
            carry_on=self._carry_on,
        )
        self.locks, self.claims, self.announcer = owners.locks, owners.claims, owners.announcer
        self.runs, self.edits, self.decisions = owners.runs, owners.edits, owners.decisions
        self.starts = owners.starts
        self.resumer, self.attempts, self.pending = owners.resumer, owners.attempts, owners.pending
        self.overview, self.sweeper, self.cancels = owners.overview, owners.sweeper, owners.cancels
        self.background, self.policy_version = owners.background, policy.version

    # Runs ---------------------------------------------------------------------------------

    def start_run(self, *, actor: Actor, channel_id: str, text: str) -> RunView:
        return self.runs.start(actor=actor, channel_id=channel_id, text=text)

    def starting_run(
        self, *, actor: Actor, channel_id: str, text: str
    ) -> AbstractContextManager[RunView]:
        """``start_run``, its lock held while the body posts its thread (``RunStarts``)."""
        return self.starts.starting(actor=actor, channel_id=channel_id, text=text)

    def set_thread(self, run_id: str, thread_ts: str) -> None:
        self.runs.set_thread(run_id, thread_ts)

    def execute_run(self, run_id: str) -> None:
        """Run the agent to its first interrupt or its end, its row kept touched meanwhile
        (``Claims.working``: live, even if its lock was lost). Never starts a thread twice."""
        with self.locks.hold(run_id), self.claims.working(run_id):
            state = self.runs.execute(run_id)
            if state is not None:
                self._carry_on(run_id, state)

    def _carry_on(self, run_id: str, state: ThreadStop | None = None) -> None:
        """Under the run's lock: record where the thread stopped, and resume at once what
        needs no one (each resume stops the thread somewhere new, recorded the same way)."""
        for request_id in self.runs.record_stop(run_id, state):
            self._resume_locked(run_id, request_id)

    def _resume_locked(
        self,
        run_id: str,
        request_id: str,
        *,
        recovering: bool = False,
        claimed: ApprovalRequest | None = None,
        unchanged: bool = False,
    ) -> None:
        """Its row kept touched until its next stop is recorded: once the request is closed,
        nothing else is open to tell maintenance the run is at work."""
        with self.claims.working(run_id):
            resumed = observed(
                self.observer,
                request_id,
                lambda: self.resumer.resume(
                    request_id, recovering=recovering, claimed=claimed, unchanged=unchanged
                ),
            )
            if resumed.ended is not None:
                self.announcer.run_finished(resumed.ended)
            elif resumed.after is not None:
                self._carry_on(run_id, resumed.after)

    def _resume(
        self,
        request_id: str,
        *,
        run_id: str | None = None,
        recovering: bool = False,
        claimed: ApprovalRequest | None = None,
    ) -> None:
        """Resume a request this process claimed, under its run's lock (``run_id``: its run,
        when the caller knows it; ``claimed``: the request as the claim read it)."""
        if run_id is None:
            with self.db.transaction() as s:
                run_id = ApprovalRepository(s).run_id_of(request_id)
        if run_id is not None:
            with self.locks.hold(run_id):
                self._resume_locked(run_id, request_id, recovering=recovering, claimed=claimed)

    def _resume_guarded(self, request_id: str, *, recovering: bool = False) -> None:
        """In the background: one request that cannot be resumed now must not keep the others
        from it. Its claim runs out and is taken over (by this process too) to try again."""
        try:
            self._resume(request_id, recovering=recovering)
        except Exception:
            logger.exception("could not resume %s; trying again when its lease ran out", request_id)

    def cancel_run(
        self, run_id: str, *, actor: Actor, via: dict[str, str] | None = None
    ) -> CancelResult:
        """Cancel a run under its lock (a resume under way finishes first, and then the run is
        either finished or waiting again), then redraw the closed cards and tell the thread."""
        standing = self.cancels.standing(run_id, actor)  # may ask Slack: before the lock
        if standing is None:  # no lock taken for an id we never issued
            self.cancels.refuse_unknown(run_id, actor=actor, via=via)
            return CancelResult(CancelOutcome.UNKNOWN_RUN)
        with self.locks.hold_within(run_id, CANCEL_WAIT_SECONDS) as held:
            if not held:  # an inbox worker must not wait out a long step of the run
                return self.cancels.refuse_busy(run_id, actor=actor, via=via)
            result = self.cancels.cancel(run_id, actor=actor, standing=standing, via=via)
        if result.cancelled:
            self.announcer.show_cards(result.closed)
            if result.run is not None:
                self.announcer.run_finished(result.run)
        return result

    # Decisions ----------------------------------------------------------------------------

    def decide(
        self,
        *,
        action_id: str,
        actor: Actor,
        decision: str,
        seen_hash: str | None,
        message: str | None = None,
        edited_args: dict[str, Any] | None = None,
        card: MessageRef | None = None,
        via: dict[str, str] | None = None,
        attempt_key: str | None = None,
        ping: bool = True,
    ) -> DecisionResult:
        """Record a decision on the version the reviewer saw, update the card, and resume if
        this completed the request. ``card``: the message clicked, if the click came from one;
        ``via``: the one attempt this decision is part of (kept in its audit row);
        ``attempt_key``: an idempotency key: a redo with it records and claims nothing;
        ``ping``: tell the remaining reviewers of a sign-off that left more to give (a caller
        deciding several actions at once passes ``False`` and calls ``ping_reviewers`` once)."""
        attempt = Attempt(
            actor=actor,
            decision=decision,
            seen_hash=seen_hash,
            message=message,
            edited_args=edited_args,
            card=card,
            via=via,
            attempt_key=attempt_key,
        )
        with ExitStack() as held:  # the run's lock, if the decision took it
            result = self.decisions.record(
                action_id=action_id,
                attempt=attempt,
                hold_run=lambda run_id: self.locks.try_keep(run_id, into=held),
            )
            if not result.run_held:
                held.close()  # taken for a claim that did not happen: nothing to resume under it
            self._after_record(result, actor=actor, held=held, ping=ping)
        return result

    def _after_record(
        self, result: DecisionResult, *, actor: Actor, held: ExitStack, ping: bool
    ) -> None:
        """Show what the decision left: a refused click's current card, the next sign-off's
        card and ping, or the resume of a completed request."""
        current = result.current
        if result.refusal is Refusal.POLICY_CHANGED and current is not None:
            self._invalidate_for_policy(current)
        if result.refusal in REDRAWN and current is not None:
            # e.g. a card drawn before versions were on buttons, or redrawn by a late update
            self.announcer.show_card(current)
        if result.approval is None:
            return
        fault_point("after_decision")
        if result.completed:
            self._resume_decided(result.approval, result, held=held)
            return
        self.announcer.show_card(result.approval)
        if ping and result.progressed:
            self.ping_reviewers(
                result.approval.id, action_ids=result.progressed, after=actor.user_id
            )

    def _resume_decided(
        self, approval: ApprovalView, result: DecisionResult, *, held: ExitStack
    ) -> None:
        """Resume what a decision completed, its card shown meanwhile: under the run's lock
        (``held``) if the decision took it before its commit (then nobody ended or cancelled
        the run or closed the request since the decision read them), else once the lock is
        free. The lock is let go before the card's update is waited for."""
        after = self.resuming_card_after.total_seconds()
        with self.announcer.showing_card(approval, after=after):
            if result.run_held:
                with held:
                    self._resume_locked(
                        approval.run.id, approval.id, claimed=result.claimed, unchanged=True
                    )
            else:
                self._resume(approval.id, run_id=approval.run.id, claimed=result.claimed)

    def _invalidate_for_policy(self, current: ApprovalView) -> None:
        """Close a card decided under an older policy, and its run with it: under the run's
        lock, as every end of a run (no stop is recorded meanwhile). A run working past the
        wait keeps the card open: the click was refused all the same, and the next one, or
        its expiry, closes it."""
        with self.locks.hold_within(current.run.id, CANCEL_WAIT_SECONDS) as held:
            if held:
                reason = (
                    f"the approval policy changed from {current.policy_version} to "
                    f"{self.policy_version} since the card was posted; ask again to review it "
                    "under the current policy"
                )
                self.resumer.invalidate(current.id, reason=reason)

    def ping_reviewers(self, request_id: str, *, action_ids: tuple[str, ...], after: str) -> None:
        """Tell who can still sign off these actions that ``after`` just did."""
        self.announcer.ping(request_id, action_ids=action_ids, after=after)

    # Background ---------------------------------------------------------------------------

    def sweep(self) -> SweepResult:
        return self.background.sweep()

    def reconcile(self) -> ReconcileResult:
        return self.background.reconcile()
