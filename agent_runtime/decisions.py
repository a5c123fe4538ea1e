"""Authorizing and recording decisions, each on the version its reviewer saw.

The move pending -> resuming is a conditional update taken in the same transaction, under the
request's row lock, that records the last required decision: whatever the concurrency, one caller
completes an approval, and only that caller resumes it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from sqlalchemy.orm import Session

from agent_runtime.action_roles import ActionRoles
from agent_runtime.authorization import Actor, Refusal, check_decision
from agent_runtime.claims import Claims
from agent_runtime.decision_types import Attempt, DecisionResult
from agent_runtime.decision_writes import (
    adopt_clicked_card,
    audit_decision,
    audit_refusal,
    facts_of,
    paused,
    plan_decision,
    write_decision,
)
from agent_runtime.edits import EditRules
from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.policy import Policy
from agent_runtime.views import approval_view
from store.db import Database
from store.models import Action, ApprovalRequest
from store.repositories import (
    ApprovalRepository,
    AuditRepository,
    CardRepository,
    DecisionRepository,
)
from store.statuses import DecisionType, RequestStatus

__all__ = ["Attempt", "DecisionRecorder", "DecisionResult"]


class _KnownMembers:
    """User group members asked of Slack before a transaction opens, never inside one (a slow
    answer would hold the request's row lock, or SQLite's write lock, all the while). A failed
    look-up is raised when, and only if, the check consults that group: it fails closed."""

    def __init__(self, groups: list[str], lookup: Callable[[str], frozenset[str]]) -> None:
        self._found: dict[str, frozenset[str] | MembershipUnconfirmed] = {}
        for group in groups:
            try:
                self._found[group] = lookup(group)
            except MembershipUnconfirmed as exc:
                self._found[group] = exc

    def __call__(self, group: str) -> frozenset[str]:
        found = self._found.get(group)
        if isinstance(found, MembershipUnconfirmed):
            raise found
        if found is None:
            raise MembershipUnconfirmed(f"user group {group} was not looked up before deciding")
        return found


class DecisionRecorder:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        edits: EditRules,
        claims: Claims,
        clock: Callable[[], dt.datetime],
        usergroup_members: Callable[[str], frozenset[str]],
        roles: ActionRoles,
    ) -> None:
        self.db = db
        self.policy = policy
        self.edits = edits
        self.claims = claims
        self.clock = clock
        self.usergroup_members = usergroup_members
        self.roles = roles

    def check(
        self, *, action_id: str, actor: Actor, decision: str, seen_hash: str | None
    ) -> Refusal | None:
        """A read-only pre-check, e.g. before opening a modal; ``record`` checks again."""
        members = self._memberships(action_id, actor=actor)
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            if action is None:
                return Refusal.UNKNOWN_APPROVAL
            attempt = Attempt(actor=actor, decision=decision, seen_hash=seen_hash, message="-")
            refusal = self._refusal(action.request, action, attempt, members=members, final=False)
            if refusal is None and paused(s, decision):
                return Refusal.EXECUTION_PAUSED
            return refusal

    def recorded_by(self, request_id: str, attempt_key: str) -> dict[str, str]:
        """Action id -> version, of the decisions one attempt recorded (e.g. before a crash)."""
        with self.db.transaction() as s:
            return DecisionRepository(s).of_attempt(request_id, attempt_key)

    def record(
        self,
        *,
        action_id: str,
        attempt: Attempt,
        hold_run: Callable[[str], bool] | None = None,
    ) -> DecisionResult:
        """Authorize and record one decision; claim the request if it was the last needed.
        ``hold_run``: called with the run's id when the decision leaves every action decided,
        before its rows and the claim are written (on PostgreSQL in one statement; an edit's
        new arguments are written just before) and the audit chain's head is locked; ``True``
        if the caller now holds the run's thread lock (it must not wait for the lock: the
        request's row lock is held meanwhile)."""
        members = self._memberships(action_id, actor=attempt.actor)
        with self.db.transaction() as s:
            signing = attempt.decision in (DecisionType.APPROVE, DecisionType.EDIT)
            request = ApprovalRepository(s).get_by_action(
                action_id, for_update=True, hold_switch=signing
            )
            if request is not None and attempt.card is not None:
                adopt_clicked_card(CardRepository(s), request, card=attempt.card)
            action = (
                next((a for a in request.actions if a.id == action_id), None) if request else None
            )
            if action is not None:
                self.roles.remember(action.id, action.approver_roles)
            early = self._redone(request, action, attempt)
            if early is None:
                early = self._refused(
                    s, request, action, action_id=action_id, attempt=attempt, members=members
                )
            if early is not None:
                return early
            assert request is not None and action is not None
            return self._write(s, request, action, attempt=attempt, hold_run=hold_run)

    def _refused(
        self,
        s: Session,
        request: ApprovalRequest | None,
        action: Action | None,
        *,
        action_id: str,
        attempt: Attempt,
        members: _KnownMembers,
    ) -> DecisionResult | None:
        """The refusal, audited, of a decision the policy, the version or the switch forbids."""
        refusal = (
            self._refusal(request, action, attempt, members=members)
            if request is not None and action is not None
            else Refusal.UNKNOWN_APPROVAL
        )
        if refusal is None and paused(s, attempt.decision, hold=True):
            refusal = Refusal.EXECUTION_PAUSED
        if refusal is None:
            return None
        audit_refusal(s, request, action, action_id=action_id, attempt=attempt, refusal=refusal)
        current = approval_view(request) if request is not None else None
        return DecisionResult(refusal=refusal, current=current)

    def _write(
        self,
        s: Session,
        request: ApprovalRequest,
        action: Action,
        *,
        attempt: Attempt,
        hold_run: Callable[[str], bool] | None,
    ) -> DecisionResult:
        """Write an authorized decision, with the claim when it completes the request."""
        normalized = (
            self.edits.normalized(action, attempt.edited_args)
            if attempt.decision == DecisionType.EDIT and attempt.edited_args is not None
            else None
        )
        planned = plan_decision(s, request, action, attempt, normalized_edit=normalized)
        complete = planned.completes
        # Before the claim is written: from the claim's commit to the resume, nobody may
        # end or cancel the run (each holds its lock). Tried, never waited for. (The claim's
        # lease counts from here: its renewals start with the resume, after the commit.)
        run_held = complete and hold_run is not None and hold_run(request.run_id)
        terms = self.claims.terms(request.id) if complete else None
        claimed = write_decision(s, planned, claim=terms)
        audit_decision(s, request, action, attempt, policy=self.policy)
        if claimed:
            AuditRepository(s).record(
                "resume_claimed",
                run_id=request.run_id,
                request_id=request.id,
                detail={"owner": self.claims.owner},
            )
        else:  # still pending (a lost claim cannot be: the request's row is held and
            # was pending), one decision more: the card shows one fewer until drawn
            CardRepository(s).forget_card(request.id, shows=RequestStatus.PENDING)
        signed = attempt.decision in (DecisionType.APPROVE, DecisionType.EDIT)
        progressed = (action.id,) if signed and action.outcome is None else ()
        return DecisionResult(
            refusal=None,
            approval=approval_view(request),
            completed=claimed,
            progressed=progressed,
            claimed=request if claimed else None,
            run_held=run_held and claimed,
        )

    @staticmethod
    def _redone(
        request: ApprovalRequest | None, action: Action | None, attempt: Attempt
    ) -> DecisionResult | None:
        """This very attempt recorded its decision before a crash: record nothing again and
        claim nothing. Past pending, resuming it (or repairing its card) is recovery's job."""
        key = attempt.attempt_key
        if request is None or action is None or key is None:
            return None
        # The request's decisions were read under its row lock: every one committed is there.
        if not any(d.attempt_key == key for d in action.decisions):
            return None
        shown = approval_view(request) if request.status == RequestStatus.PENDING else None
        return DecisionResult(refusal=None, approval=shown)

    def _memberships(self, action_id: str, *, actor: Actor) -> _KnownMembers:
        policy = self.policy.for_team(actor.team_id)
        if not any(spec.usergroups for spec in policy.roles.values()):
            return _KnownMembers([], self.usergroup_members)
        roles = self.roles.get(action_id)
        if roles is None:
            with self.db.transaction() as s:
                action = ApprovalRepository(s).get_action(action_id)
                roles = tuple(action.approver_roles) if action is not None else ()
            if action is not None:
                self.roles.remember(action_id, roles)
        groups = policy.groups_to_check(actor.user_id, roles)
        return _KnownMembers(groups, self.usergroup_members)

    def _refusal(
        self,
        request: ApprovalRequest,
        action: Action,
        attempt: Attempt,
        *,
        members: Callable[[str], frozenset[str]],
        final: bool = True,
    ) -> Refusal | None:
        try:
            refusal = check_decision(
                self.policy,
                facts_of(request, action),
                attempt.actor,
                attempt.decision,
                now=self.clock(),
                usergroup_members=members,
            )
        except MembershipUnconfirmed:
            return Refusal.MEMBERSHIP_UNCONFIRMED  # fail closed, and say why
        if refusal is not None:
            return refusal
        if request.policy_version != self.policy.version:
            return Refusal.POLICY_CHANGED
        if attempt.seen_hash != action.bound_hash:
            return Refusal.STALE_VERSION
        needs_reason = attempt.decision in (DecisionType.REJECT, DecisionType.RESPOND)
        if needs_reason and not (attempt.message or "").strip():
            return Refusal.REASON_REQUIRED
        if (
            final
            and attempt.decision == DecisionType.EDIT
            and not self._valid_edit(action, attempt)
        ):
            return Refusal.INVALID_EDIT
        return None

    def _valid_edit(self, action: Action, attempt: Attempt) -> bool:
        edited = attempt.edited_args
        return isinstance(edited, dict) and not self.edits.errors(action, edited)
