"""Authorizing and recording decisions. ``ApprovalEngine`` delegates here.

The move pending -> resuming is a conditional update taken in the same transaction, under the
request's row lock, that records the last required decision: whatever the concurrency, one caller
completes an approval, and only that caller resumes it (see ``resume``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from agent_runtime.authorization import ActionFacts, Actor, Refusal, check_decision, outcome_after
from agent_runtime.constraints import violations
from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.notifier import MessageRef
from agent_runtime.schemas import InvalidArguments
from agent_runtime.views import ApprovalView, approval_view
from agent_runtime.wire import action_hash
from store.models import Action, ApprovalRequest
from store.repositories import ApprovalRepository, AuditRepository, DecisionRepository

if TYPE_CHECKING:
    from agent_runtime.engine import ApprovalEngine


@dataclass(frozen=True)
class DecisionResult:
    refusal: Refusal | None
    approval: ApprovalView | None = None
    completed: bool = False
    current: ApprovalView | None = None
    """On a refusal: the approval as it is now, to explain what changed."""


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
        if d.type in ("approve", "edit") and d.action_hash == action.bound_hash
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


def check(
    engine: ApprovalEngine, *, action_id: str, actor: Actor, decision: str, seen_hash: str | None
) -> Refusal | None:
    """A read-only pre-check, e.g. before opening a modal; ``record`` checks again."""
    members = _memberships(engine, action_id, actor=actor)
    with engine.db.transaction() as s:
        action = ApprovalRepository(s).get_action(action_id)
        if action is None:
            return Refusal.UNKNOWN_APPROVAL
        attempt = Attempt(actor=actor, decision=decision, seen_hash=seen_hash, message="-")
        return _refusal(engine, action.request, action, attempt, members=members, final=False)


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


def _memberships(engine: ApprovalEngine, action_id: str, *, actor: Actor) -> _KnownMembers:
    policy = engine.policy
    if not any(spec.usergroups for spec in policy.roles.values()):
        return _KnownMembers([], engine.usergroup_members)
    with engine.db.transaction() as s:
        action = ApprovalRepository(s).get_action(action_id)
        roles = list(action.approver_roles) if action is not None else []
    return _KnownMembers(policy.groups_to_check(actor.user_id, roles), engine.usergroup_members)


def edit_errors(engine: ApprovalEngine, action: Action, edited: dict[str, Any]) -> dict[str, str]:
    """What is wrong with an edit, by argument: the tool's schema first, then the policy's
    constraints (locked arguments compared with the call as first proposed)."""
    catalog = engine.runtime.catalog
    errors = catalog.errors(action.tool_name, edited)
    if errors:
        return errors
    try:
        normalized = catalog.normalize(action.tool_name, edited)
    except InvalidArguments as exc:
        return dict(exc.errors)
    rule = engine.policy.rule_for(action.tool_name)
    return violations(rule.constraints, normalized, original=action.args)


def _refusal(
    engine: ApprovalEngine,
    request: ApprovalRequest,
    action: Action,
    attempt: Attempt,
    *,
    members: Callable[[str], frozenset[str]],
    final: bool = True,
) -> Refusal | None:
    try:
        refusal = check_decision(
            engine.policy,
            _facts(request, action),
            attempt.actor,
            attempt.decision,
            now=engine.clock(),
            usergroup_members=members,
        )
    except MembershipUnconfirmed:
        return Refusal.MEMBERSHIP_UNCONFIRMED  # fail closed, and say why
    if refusal is not None:
        return refusal
    if request.policy_version != engine.policy.version:
        return Refusal.POLICY_CHANGED
    if attempt.seen_hash != action.bound_hash:
        return Refusal.STALE_VERSION
    if attempt.decision in ("reject", "respond") and not (attempt.message or "").strip():
        return Refusal.REASON_REQUIRED
    if (
        final
        and attempt.decision == "edit"
        and (
            not isinstance(attempt.edited_args, dict)
            or edit_errors(engine, action, attempt.edited_args)
        )
    ):
        return Refusal.INVALID_EDIT
    return None


def record(engine: ApprovalEngine, *, action_id: str, attempt: Attempt) -> DecisionResult:
    """Authorize and record one decision; claim the request if it was the last one needed."""
    members = _memberships(engine, action_id, actor=attempt.actor)
    with engine.db.transaction() as s:
        repos = ApprovalRepository(s)
        found = repos.get_action(action_id)
        request = repos.get(found.request_id, for_update=True) if found else None
        if request is not None and attempt.card is not None:
            _adopt_clicked_card(repos, request, card=attempt.card)
        action = next((a for a in request.actions if a.id == action_id), None) if request else None
        key = attempt.attempt_key
        if request and action and key and DecisionRepository(s).by_attempt(action.id, key):
            # This very attempt recorded it before a crash: nothing more to record. Past
            # pending, resuming it (or repairing its card) is recovery's job, not this redo's.
            shown = approval_view(request) if request.status == "pending" else None
            return DecisionResult(None, shown, completed=all(a.outcome for a in request.actions))
        refusal = (
            _refusal(engine, request, action, attempt, members=members)
            if request is not None and action is not None
            else Refusal.UNKNOWN_APPROVAL
        )
        if refusal is not None:
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
            current = approval_view(request) if request is not None else None
            return DecisionResult(refusal=refusal, current=current)
        assert request is not None and action is not None
        _apply(s, request, action, attempt, normalized_edit=_normalized(engine, action, attempt))
        completed = all(a.outcome for a in request.actions)
        if completed and repos.claim(request.id, owner=engine.owner, lease=engine.lease):
            request.status = "resuming"
            AuditRepository(s).record(
                "resume_claimed",
                run_id=request.run_id,
                request_id=request.id,
                detail={"owner": engine.owner},
            )
        return DecisionResult(refusal=None, approval=approval_view(request), completed=completed)


def _adopt_clicked_card(
    repo: ApprovalRepository, request: ApprovalRequest, *, card: MessageRef
) -> None:
    """A click on a card whose reference is not stored yet (its post is still being answered,
    or the answer was lost): the message clicked, in the run's channel, is the card."""
    if card.channel == request.run.channel_id:
        repo.adopt_card(request, channel=card.channel, ts=card.ts, shows="pending")


def _apply(
    s: Session,
    request: ApprovalRequest,
    action: Action,
    attempt: Attempt,
    *,
    normalized_edit: dict[str, Any] | None,
) -> None:
    """An edit binds the action to a new hash: approvals of the old version stop counting."""
    if attempt.decision == "edit":
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
    action.outcome = "edited" if outcome == "approved" and action.edited_args else outcome
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
            "message": attempt.message,
            "edited_args": action.edited_args if attempt.decision == "edit" else None,
            "seen_hash": attempt.seen_hash,
            "action_hash": action.bound_hash,
            "outcome": action.outcome,
            **(attempt.via or {}),
        },
    )


def _normalized(engine: ApprovalEngine, action: Action, attempt: Attempt) -> dict[str, Any] | None:
    """Edits are stored as the tool will see them; ``_refusal`` already proved them valid."""
    if attempt.decision != "edit" or attempt.edited_args is None:
        return None
    return engine.runtime.catalog.normalize(action.tool_name, attempt.edited_args)
