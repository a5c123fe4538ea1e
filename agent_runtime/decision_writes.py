"""The writes of a decision, in the caller's transaction: the decision row, the action's new
outcome, the claim of the request it completes, and the audit event; a refusal's audit event;
the card a click came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from agent_runtime.authorization import ActionFacts, Refusal, outcome_after
from agent_runtime.decision_types import Attempt
from agent_runtime.notifier import MessageRef
from agent_runtime.policy import Policy
from agent_runtime.wire import action_hash
from store.claim_repository import ClaimTerms
from store.decision_repository import DecisionFields
from store.models import Action, ApprovalRequest
from store.repositories import (
    ApprovalRepository,
    AuditRepository,
    CardRepository,
    DecisionRepository,
)
from store.statuses import ActionOutcome, DecisionType
from store.switch import SwitchRepository


def facts_of(request: ApprovalRequest, action: Action) -> ActionFacts:
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


def audit_refusal(
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


def adopt_clicked_card(repo: CardRepository, request: ApprovalRequest, *, card: MessageRef) -> None:
    """A click on a card whose reference is not stored yet (its post is still being answered,
    or the answer was lost): the message clicked, where the card is posted (the run's channel
    or the request's review channel), is the card. What it shows is not known to be current:
    the click's own decision changes it, and the repair is to find it until it is redrawn."""
    if card.channel == (request.review_channel or request.run.channel_id):
        repo.adopt_card(request, channel=card.channel, ts=card.ts, shows=None)


@dataclass(frozen=True)
class Planned:
    """A decision about to be written: the action's outcome after it (None: unchanged), and
    whether it leaves every action of its request decided."""

    request: ApprovalRequest
    action: Action
    attempt: Attempt
    outcome: str | None
    completes: bool


def plan_decision(
    s: Session,
    request: ApprovalRequest,
    action: Action,
    attempt: Attempt,
    *,
    normalized_edit: dict[str, Any] | None,
) -> Planned:
    """An edit binds the action to a new hash (written now): approvals of the old version stop
    counting. What the decision does to its action and request."""
    if attempt.decision == DecisionType.EDIT:
        assert normalized_edit is not None
        ApprovalRepository(s).decide_action(
            action,
            edited_args=normalized_edit,
            current_hash=action_hash(action.tool_name, normalized_edit, request.policy_version),
        )
    approvers = facts_of(request, action).approvers_so_far | {attempt.actor.user_id}
    outcome = outcome_after(
        attempt.decision,
        distinct_approvers=len(approvers),
        approvals_required=action.approvals_required,
    )
    approved_edit = outcome == ActionOutcome.APPROVED and action.edited_args
    decided = ActionOutcome.EDITED if approved_edit else outcome
    after = decided or action.outcome  # None: the action still waits for more sign-offs
    completes = all(after if a is action else a.outcome for a in request.actions)
    return Planned(
        request,
        action,
        attempt,
        outcome=decided if decided != action.outcome else None,
        completes=completes,
    )


def write_decision(s: Session, planned: Planned, *, claim: ClaimTerms | None) -> bool:
    """The decision's rows, written before the audit chain's head is locked
    (``audit_decision``); with ``claim``, the claim of the request it completes (in the same
    statement on PostgreSQL when the decision changes its action's outcome). True if that
    claim was won."""
    attempt, action = planned.attempt, planned.action
    fields = DecisionFields(
        reviewer_id=attempt.actor.user_id,
        team_id=attempt.actor.team_id,
        type_=attempt.decision,
        message=attempt.message,
        attempt_key=attempt.attempt_key,
    )
    if claim is None:
        DecisionRepository(s).add(action, **fields, outcome=planned.outcome)
        return False
    return DecisionRepository(s).add_claiming(
        action, fields=fields, outcome=planned.outcome, claim=claim, loaded=planned.request
    )


def audit_decision(
    s: Session, request: ApprovalRequest, action: Action, attempt: Attempt, *, policy: Policy
) -> None:
    """The decision's audit event, once ``write_decision`` wrote its rows."""
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


def paused(s: Session, decision: str, *, hold: bool = False) -> bool:
    """While the kill switch is on, nothing can be approved (a reject is still recorded)."""
    signs = decision in (DecisionType.APPROVE, DecisionType.EDIT)
    return signs and SwitchRepository(s).state(hold=hold).paused
