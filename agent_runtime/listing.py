"""What is waiting on a reviewer: pending approvals with an action they may decide now."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_runtime.authorization import ActionFacts, Actor, is_eligible
from agent_runtime.policy import REQUESTER_ROLE
from agent_runtime.views import ActionView, ApprovalView, approval_view
from store.repositories import ApprovalRepository

if TYPE_CHECKING:
    from agent_runtime.engine import ApprovalEngine


def pending_for(engine: ApprovalEngine, actor: Actor, *, limit: int = 50) -> list[ApprovalView]:
    """Narrowed in SQL by the eligibility rules (open review slots), then checked exactly."""
    policy = engine.policy
    roles = [  # "requester" counts on one's own requests only, as in is_eligible
        role
        for role in policy.roles
        if role != REQUESTER_ROLE
        and policy.is_member(actor.user_id, role, usergroup_members=engine.usergroup_members)
    ]
    with engine.db.transaction() as s:
        requests = ApprovalRepository(s).pending(
            reviewer=actor.user_id, roles=roles, own_roles=[REQUESTER_ROLE], limit=limit
        )
        views = [approval_view(r) for r in requests]
    mine = [
        view
        for view in views
        if any(a.outcome is None and may_decide(engine, view, a, actor) for a in view.actions)
    ]
    return mine[:limit]


def may_decide(
    engine: ApprovalEngine, view: ApprovalView, action: ActionView, actor: Actor
) -> bool:
    facts = ActionFacts(
        request_status=view.status,
        team_id=None,
        requester_id=view.requester_id,
        expires_at=view.expires_at,
        outcome=action.outcome,
        allowed_decisions=action.allowed_decisions,
        approver_roles=action.approver_roles,
        self_approval=False,
        approvers_so_far=frozenset(action.approvers),
    )
    refusal = is_eligible(
        engine.policy, facts, actor.user_id, usergroup_members=engine.usergroup_members
    )
    return refusal is None and actor.user_id not in action.approvers
