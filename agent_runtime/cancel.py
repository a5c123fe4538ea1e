"""Cancelling a run: its requester (or an admin) stops a run that is still under way.

One transaction, taken under the run's thread lock, checks who asks, marks the run cancelled
and closes every open approval of the run: nothing of it is resumed afterwards, whichever click
or sweep claimed a request before. Every attempt, allowed or refused, is audited. What to tell
people (cards redrawn, a line in the thread) is the caller's to do, after the transaction.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from agent_runtime.authorization import Actor
from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.policy import Policy
from agent_runtime.views import ApprovalView, RunView, approval_view, run_view
from store.db import Database
from store.models import Run
from store.repositories import ApprovalRepository, AuditRepository, RunRepository
from store.statuses import UNFINISHED_RUN, RequestStatus, RunStatus

CANCELLED_OUTCOME = "the run was cancelled"


class CancelOutcome(enum.StrEnum):
    """What a cancel attempt came to; each has one user-facing text in the bot."""

    CANCELLED = "cancelled"
    ALREADY_CANCELLED = "already_cancelled"
    FINISHED = "finished"
    """The run had already completed or failed: there was nothing left to stop."""
    NOT_ALLOWED = "not_allowed"
    UNKNOWN_RUN = "unknown_run"
    OTHER_WORKSPACE = "other_workspace"
    MEMBERSHIP_UNCONFIRMED = "membership_unconfirmed"
    BUSY = "busy"
    """The run was working (the agent or a tool) for longer than a cancel waits: try later."""


class Standing(enum.Enum):
    """Why the actor may cancel: their own run, the admins role, neither, or unknown yet."""

    REQUESTER = "requester"
    ADMIN = "admins"
    NONE = "none"
    UNCONFIRMED = "unconfirmed"


@dataclass(frozen=True)
class CancelResult:
    outcome: CancelOutcome
    run: RunView | None = None
    """The run as it is now (for a refusal: e.g. who cancelled it, if someone did)."""
    closed: tuple[ApprovalView, ...] = ()
    """The approvals this cancel closed, to redraw their cards."""

    @property
    def cancelled(self) -> bool:
        return self.outcome is CancelOutcome.CANCELLED


class RunCanceller:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        clock: Callable[[], dt.datetime],
        usergroup_members: Callable[[str], frozenset[str]],
    ) -> None:
        self.db = db
        self.policy = policy
        self.clock = clock
        self.usergroup_members = usergroup_members

    def standing(self, run_id: str, actor: Actor) -> Standing | None:
        """Why ``actor`` may cancel this run (``None``: no such run). Asked before the run's
        lock is taken: an admin's user groups may need asking Slack, which must never happen
        while a lock or a row is held."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            if run is None:
                return None
            requester = run.requester_id
        if actor.user_id == requester:
            return Standing.REQUESTER
        try:
            admin = self.policy.for_team(actor.team_id).is_admin(
                actor.user_id, usergroup_members=self.usergroup_members
            )
        except MembershipUnconfirmed:
            return Standing.UNCONFIRMED
        return Standing.ADMIN if admin else Standing.NONE

    def cancel(
        self,
        run_id: str,
        *,
        actor: Actor,
        standing: Standing,
        via: dict[str, str] | None = None,
    ) -> CancelResult:
        """Cancel the run if ``actor`` may (``standing``, from ``standing``) and it is not
        finished. The caller holds the run's thread lock, so no resume of this run is under
        way, and none starts until we are done. ``via``: what the attempt came from (e.g. the
        stored click), kept in its audit rows."""
        with self.db.transaction() as s:
            # Lock order everywhere: request rows, then the run's row, then the audit chain.
            requests = ApprovalRepository(s).lock_open_of_run(run_id)
            run = RunRepository(s).get(run_id, for_update=True)
            refused = _why_not(run, actor, standing)
            if refused is not None:
                _audit_refusal(s, run_id, run, actor=actor, outcome=refused, via=via)
                return CancelResult(refused, run=run_view(run) if run is not None else None)
            assert run is not None
            now = self.clock()
            run.cancelled_by, run.cancelled_at = actor.user_id, now
            RunRepository(s).set_status(run, RunStatus.CANCELLED)
            audit = AuditRepository(s)
            for request in requests:
                ApprovalRepository(s).finish(
                    request, status=RequestStatus.CANCELLED, outcome=CANCELLED_OUTCOME
                )
                audit.record(
                    "request_cancelled",
                    actor_id=actor.user_id,
                    team_id=request.team_id,
                    run_id=run_id,
                    request_id=request.id,
                    reason=CANCELLED_OUTCOME,
                )
            audit.record(
                "run_cancelled",
                outcome="allowed",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=run_id,
                detail={
                    "as": standing.value,
                    "at": now.isoformat(),
                    "closed": [r.id for r in requests],
                    **(via or {}),
                },
            )
            return CancelResult(
                CancelOutcome.CANCELLED,
                run=run_view(run),
                closed=tuple(approval_view(r) for r in requests),
            )

    def refuse_unknown(self, run_id: str, *, actor: Actor, via: dict[str, str] | None) -> None:
        """Audit a cancel naming no run we know (e.g. a forged button value)."""
        with self.db.transaction() as s:
            _audit_refusal(s, run_id, None, actor=actor, outcome=CancelOutcome.UNKNOWN_RUN, via=via)

    def refuse_busy(self, run_id: str, *, actor: Actor, via: dict[str, str] | None) -> CancelResult:
        """Audit a cancel that found the run working past the wait, and say so."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            _audit_refusal(s, run_id, run, actor=actor, outcome=CancelOutcome.BUSY, via=via)
            return CancelResult(CancelOutcome.BUSY, run=run_view(run) if run else None)


def _why_not(run: Run | None, actor: Actor, standing: Standing) -> CancelOutcome | None:
    """In the order a user would want to be told; a finished run is an answer, not a fault."""
    if run is None:
        return CancelOutcome.UNKNOWN_RUN
    if run.team_id and actor.team_id and run.team_id != actor.team_id:
        return CancelOutcome.OTHER_WORKSPACE
    if standing is Standing.UNCONFIRMED:
        return CancelOutcome.MEMBERSHIP_UNCONFIRMED
    if standing is Standing.NONE:
        return CancelOutcome.NOT_ALLOWED
    if run.status == RunStatus.CANCELLED:
        return CancelOutcome.ALREADY_CANCELLED
    if run.status not in UNFINISHED_RUN:
        return CancelOutcome.FINISHED
    return None


def _audit_refusal(
    s: Session,
    run_id: str,
    run: Run | None,
    *,
    actor: Actor,
    outcome: CancelOutcome,
    via: dict[str, str] | None,
) -> None:
    AuditRepository(s).record(
        "run_cancel_refused",
        outcome="refused",
        actor_id=actor.user_id,
        team_id=actor.team_id,
        run_id=run.id if run is not None else None,
        reason=outcome.value,
        detail={"run": run_id[:64], "status": run.status if run else None, **(via or {})},
    )
