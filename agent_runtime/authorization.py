"""Who may decide what: pure functions over the recorded action and its decisions."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_runtime.policy import REQUESTER_ROLE, Policy
from store.statuses import ActionOutcome, DecisionType, RequestStatus


class Refusal(enum.StrEnum):
    """Why a decision attempt was refused; each has one user-facing text in the bot."""

    UNKNOWN_APPROVAL = "unknown_approval"
    OTHER_WORKSPACE = "other_workspace"
    ALREADY_DECIDED = "already_decided"
    EXPIRED = "expired"
    NOT_AN_APPROVER = "not_an_approver"
    SELF_APPROVAL = "self_approval"
    DECISION_NOT_ALLOWED = "decision_not_allowed"
    ALREADY_APPROVED = "already_approved"
    REASON_REQUIRED = "reason_required"
    INVALID_EDIT = "invalid_edit"
    STALE_VERSION = "stale_version"
    MEMBERSHIP_UNCONFIRMED = "membership_unconfirmed"
    POLICY_CHANGED = "policy_changed"
    RUN_CANCELLED = "run_cancelled"
    REQUEST_CLOSED = "request_closed"
    """Closed without being resumed (e.g. its run ended, or the policy changed)."""
    EXECUTION_PAUSED = "execution_paused"


@dataclass(frozen=True)
class Actor:
    user_id: str
    team_id: str | None = None
    enterprise_id: str | None = None


@dataclass(frozen=True)
class ActionFacts:
    """What the checks need to know about one action, detached from the ORM."""

    request_status: str
    team_id: str | None
    requester_id: str
    expires_at: dt.datetime
    outcome: str | None
    allowed_decisions: Sequence[str]
    approver_roles: Sequence[str]
    self_approval: bool
    approvers_so_far: frozenset[str]


def is_eligible(
    policy: Policy,
    facts: ActionFacts,
    user_id: str,
    *,
    usergroup_members: Callable[[str], frozenset[str]],
) -> Refusal | None:
    """Separation of duties first: the requester is refused unless the policy lets them decide.
    ``self_approval`` lifts only the ban on one's own run; the requester must still hold one
    of the approver roles (the ``requester`` role itself is for ask-the-human tools). Roles
    are those of the action's workspace."""
    policy = policy.for_team(facts.team_id)
    if user_id == facts.requester_id:
        if REQUESTER_ROLE in facts.approver_roles:
            return None
        if not facts.self_approval:
            return Refusal.SELF_APPROVAL
    roles = [r for r in facts.approver_roles if r != REQUESTER_ROLE]
    if any(policy.is_member(user_id, r, usergroup_members=usergroup_members) for r in roles):
        return None
    return Refusal.NOT_AN_APPROVER


def closed_refusal(request_status: str) -> Refusal | None:
    """Why nothing more can be decided on a request in this status (None: it is pending)."""
    if request_status == RequestStatus.CANCELLED:
        return Refusal.RUN_CANCELLED
    if request_status == RequestStatus.INVALIDATED:
        return Refusal.REQUEST_CLOSED
    if request_status != RequestStatus.PENDING:
        return Refusal.ALREADY_DECIDED
    return None


def check_decision(
    policy: Policy,
    facts: ActionFacts,
    actor: Actor,
    decision: str,
    *,
    now: dt.datetime,
    usergroup_members: Callable[[str], frozenset[str]],
) -> Refusal | None:
    """Every rule a click must pass, in the order a reviewer would want to be told."""
    if facts.team_id and actor.team_id and facts.team_id != actor.team_id:
        return Refusal.OTHER_WORKSPACE
    closed = closed_refusal(facts.request_status)
    if closed is not None:
        return closed
    if facts.outcome is not None:
        return Refusal.ALREADY_DECIDED
    if now >= facts.expires_at:
        return Refusal.EXPIRED
    refusal = is_eligible(policy, facts, actor.user_id, usergroup_members=usergroup_members)
    if refusal is not None:
        return refusal
    if decision not in facts.allowed_decisions:
        return Refusal.DECISION_NOT_ALLOWED
    if (
        decision in (DecisionType.APPROVE, DecisionType.EDIT)
        and actor.user_id in facts.approvers_so_far
    ):
        return Refusal.ALREADY_APPROVED
    return None


def outcome_after(
    decision: str, *, distinct_approvers: int, approvals_required: int
) -> ActionOutcome | None:
    """Reject is a veto; approvals count until the required number of distinct reviewers."""
    if decision == DecisionType.REJECT:
        return ActionOutcome.REJECTED
    if decision == DecisionType.RESPOND:
        return ActionOutcome.RESPONDED
    if distinct_approvers >= approvals_required:
        return ActionOutcome.EDITED if decision == DecisionType.EDIT else ActionOutcome.APPROVED
    return None
