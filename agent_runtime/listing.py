"""What is waiting on a reviewer: pending approvals with an action they may decide now."""

from __future__ import annotations

from collections.abc import Callable

from agent_runtime.authorization import ActionFacts, Actor, is_eligible
from agent_runtime.policy import REQUESTER_ROLE, Policy
from agent_runtime.views import ActionView, ApprovalView, approval_view
from store.db import Database
from store.repositories import ApprovalRepository


class PendingList:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        usergroup_members: Callable[[str], frozenset[str]],
    ) -> None:
        self.db = db
        self.policy = policy
        self.usergroup_members = usergroup_members

    def for_reviewer(self, actor: Actor, *, limit: int = 50) -> list[ApprovalView]:
        """Narrowed in SQL by the eligibility rules (open review slots), then checked exactly."""
        roles = [  # "requester" counts on one's own requests only, as in is_eligible
            role
            for role in self.policy.roles
            if role != REQUESTER_ROLE
            and self.policy.is_member(actor.user_id, role, usergroup_members=self.usergroup_members)
        ]
        with self.db.transaction() as s:
            requests = ApprovalRepository(s).pending(
                reviewer=actor.user_id, roles=roles, own_roles=[REQUESTER_ROLE], limit=limit
            )
            views = [approval_view(r) for r in requests]
        mine = [
            view
            for view in views
            if any(a.outcome is None and self.may_decide(view, a, actor) for a in view.actions)
        ]
        return mine[:limit]

    def may_decide(self, view: ApprovalView, action: ActionView, actor: Actor) -> bool:
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
            self.policy, facts, actor.user_id, usergroup_members=self.usergroup_members
        )
        return refusal is None and actor.user_id not in action.approvers
