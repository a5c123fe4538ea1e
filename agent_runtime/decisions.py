"""Authorizing and recording decisions, each on the version its reviewer saw.

The move pending -> resuming is a conditional update taken in the same transaction, under the
request's row lock, that records the last required decision: whatever the concurrency, one caller
completes an approval, and only that caller resumes it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from agent_runtime.action_roles import ActionRoles
from agent_runtime.authorization import ActionFacts, Actor, Refusal, check_decision, outcome_after
from agent_runtime.claims import Claims
from agent_runtime.edits import EditRules
from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.notifier import MessageRef
from agent_runtime.policy import Policy
from agent_runtime.views import ApprovalView, approval_view
from agent_runtime.wire import action_hash
from store.db import Database
from store.models import Action, ApprovalRequest
from store.repositories import ApprovalRepository, AuditRepository, DecisionRepository
from store.statuses import ActionOutcome, DecisionType, RequestStatus
from store.switch import SwitchRepository


@dataclass(frozen=True)
class DecisionResult:
    refusal: Refusal | None
    approval: ApprovalView | None = None
    completed: bool = False
    """This decision completed the request and this process claimed it: resume it."""
    current: ApprovalView | None = None
    """On a refusal: the approval as it is now, to explain what changed."""
    progressed: tuple[str, ...] = ()
    """Actions this decision signed off that still wait for more approvals: their remaining
    reviewers are told. Empty for a redo, which tells nobody again."""


@dataclass(frozen=True)
class Attempt:
    actor: Actor
    decision: str
    seen_hash: str | None
    """The version (action hash) the reviewer saw when deciding: button values and modal
    metadata carry it. A decision on any other version is refused."""
    message: str | None = None
    edited_args: dict[str, Any] | None = None
    card: MessageRef | None = None
    """The message clicked, when the decision came from a button on the card."""
    via: dict[str, str] | None = None
    """What one click asked for, when it decides several actions (e.g. ``{"via":
    "approve_all", "attempt": ...}``): copied into each audit row so they group as one."""
    attempt_key: str | None = None
    """Names this attempt (e.g. a stored click): kept with the decision, and a second
    ``record`` with the same key finds it and records nothing again."""


def _facts(request: ApprovalRequest, action: Action) -> ActionFacts:
    approvers = frozenset(
        d.reviewer_id
        for d in action.decisions
        if d.type in (DecisionType.APPROVE, DecisionType.EDIT)
        and d.action_hash == action.bound_hash
    )
    return ActionFacts(
        request_status=request.status,
        team_id=request.team_id,
        requester_id=request.requester_id,
        expires_at=request.expires_at,
        outcome=action.outcome,
        allowed_decisions=tuple(action.allowed_decisions),
        approver_roles=tuple(action.approver_roles),
        self_approval=action.self_approval,
        approvers_so_far=approvers,
    )


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
            if refusal is None and _paused(s, decision):
                return Refusal.EXECUTION_PAUSED
            return refusal

    def recorded_by(self, request_id: str, attempt_key: str) -> dict[str, str]:
        """Action id -> version, of the decisions one attempt recorded (e.g. before a crash)."""
        with self.db.transaction() as s:
            return DecisionRepository(s).of_attempt(request_id, attempt_key)

    def record(self, *, action_id: str, attempt: Attempt) -> DecisionResult:
        """Authorize and record one decision; claim the request if it was the last needed."""
        members = self._memberships(action_id, actor=attempt.actor)
        with self.db.transaction() as s:
            repos = ApprovalRepository(s)
            request = repos.get_by_action(action_id, for_update=True)
            if request is not None and attempt.card is not None:
                _adopt_clicked_card(repos, request, card=attempt.card)
            action = (
                next((a for a in request.actions if a.id == action_id), None) if request else None
            )
            if action is not None:
                self.roles.remember(action.id, action.approver_roles)
            redone = self._redone(request, action, attempt)
            if redone is not None:
                return redone
            refusal = (
                self._refusal(request, action, attempt, members=members)
                if request is not None and action is not None
                else Refusal.UNKNOWN_APPROVAL
            )
            if refusal is None and _paused(s, attempt.decision, hold=True):
                refusal = Refusal.EXECUTION_PAUSED
            if refusal is not None:
                _audit_refusal(
                    s, request, action, action_id=action_id, attempt=attempt, refusal=refusal
                )
                current = approval_view(request) if request is not None else None
                return DecisionResult(refusal=refusal, current=current)
            assert request is not None and action is not None
            normalized = (
                self.edits.normalized(action, attempt.edited_args)
                if attempt.decision == DecisionType.EDIT and attempt.edited_args is not None
                else None
            )
            _apply(s, request, action, attempt, normalized_edit=normalized, policy=self.policy)
            claimed = all(a.outcome for a in request.actions) and self.claims.claim(
                s, request.id, loaded=request
            )
            if claimed:
                AuditRepository(s).record(
                    "resume_claimed",
                    run_id=request.run_id,
                    request_id=request.id,
                    detail={"owner": self.claims.owner},
                )
            signed = attempt.decision in (DecisionType.APPROVE, DecisionType.EDIT)
            progressed = (action.id,) if signed and action.outcome is None else ()
            return DecisionResult(
                refusal=None,
                approval=approval_view(request),
                completed=claimed,
                progressed=progressed,
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
                _facts(request, action),
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


def _audit_refusal(
    s: Session,
    request: ApprovalRequest | None,
    action: Action | None,
    *,
    action_id: str,
    attempt: Attempt,
    refusal: Refusal,
) -> None:
    AuditRepository(s).record(
        "decision_refused",
        outcome="refused",
        actor_id=attempt.actor.user_id,
        team_id=attempt.actor.team_id,
        run_id=request.run_id if request else None,
        request_id=request.id if request else None,
        action_id=action_id,
        reason=refusal.value,
        detail={
            "decision": attempt.decision,
            "seen_hash": attempt.seen_hash,
            "current_hash": action.bound_hash if action else None,
            **(attempt.via or {}),
        },
    )


def _adopt_clicked_card(
    repo: ApprovalRepository, request: ApprovalRequest, *, card: MessageRef
) -> None:
    """A click on a card whose reference is not stored yet (its post is still being answered,
    or the answer was lost): the message clicked, where the card is posted (the run's channel
    or the request's review channel), is the card."""
    if card.channel == (request.review_channel or request.run.channel_id):
        repo.adopt_card(request, channel=card.channel, ts=card.ts, shows=RequestStatus.PENDING)


def _apply(
    s: Session,
    request: ApprovalRequest,
    action: Action,
    attempt: Attempt,
    *,
    normalized_edit: dict[str, Any] | None,
    policy: Policy,
) -> None:
    """An edit binds the action to a new hash: approvals of the old version stop counting."""
    if attempt.decision == DecisionType.EDIT:
        assert normalized_edit is not None
        action.edited_args = normalized_edit
        action.current_hash = action_hash(action.tool_name, normalized_edit, request.policy_version)
    approvers = _facts(request, action).approvers_so_far | {attempt.actor.user_id}
    DecisionRepository(s).add(
        action,
        reviewer_id=attempt.actor.user_id,
        team_id=attempt.actor.team_id,
        type_=attempt.decision,
        message=attempt.message,
        attempt_key=attempt.attempt_key,
    )
    outcome = outcome_after(
        attempt.decision,
        distinct_approvers=len(approvers),
        approvals_required=action.approvals_required,
    )
    approved_edit = outcome == ActionOutcome.APPROVED and action.edited_args
    action.outcome = ActionOutcome.EDITED if approved_edit else outcome
    rule = policy.rule_for(action.tool_name)
    AuditRepository(s).record(
        "decision_recorded",
        outcome="allowed",
        actor_id=attempt.actor.user_id,
        team_id=attempt.actor.team_id,
        run_id=request.run_id,
        request_id=request.id,
        action_id=action.id,
        detail={
            "decision": attempt.decision,
            "message": (
                rule.redacted_text(attempt.message, action.args, action.edited_args)
                if attempt.message
                else attempt.message
            ),
            "tool": action.tool_name,
            "tool_call_id": action.tool_call_id,
            "edited_args": (
                rule.redacted(action.edited_args) if attempt.decision == DecisionType.EDIT else None
            ),
            "seen_hash": attempt.seen_hash,
            "action_hash": action.bound_hash,
            "outcome": action.outcome,
            **(attempt.via or {}),
        },
    )


def _paused(s: Session, decision: str, *, hold: bool = False) -> bool:
    """While the kill switch is on, nothing can be approved (a reject is still recorded)."""
    signs = decision in (DecisionType.APPROVE, DecisionType.EDIT)
    return signs and SwitchRepository(s).state(hold=hold).paused
