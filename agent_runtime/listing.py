"""What is waiting on a reviewer: pending approvals with an action they may decide now."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from agent_runtime.authorization import ActionFacts, Actor, check_decision
from agent_runtime.policy import REQUESTER_ROLE, Policy
from agent_runtime.views import ActionView, ApprovalView, approval_view
from store.db import Database
from store.models import utcnow
from store.pending_reads import pending_records

MAX_ROUNDS = 8
"""Chunks of candidates one page may read: the slots over-approximate (user groups, expiry),
so a page can need more than one; bounded so that a page stays fast."""


@dataclass(frozen=True)
class Page:
    items: list[ApprovalView]
    next_after: str | None
    """The request id the next page starts after; None on the last page."""


class PendingList:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        usergroup_members: Callable[[str], frozenset[str]],
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.db = db
        self.policy = policy
        self.usergroup_members = usergroup_members
        self.clock = clock

    def for_reviewer(self, actor: Actor, *, limit: int = 50) -> list[ApprovalView]:
        """Oldest first: what ``actor`` may decide now (see ``page``)."""
        return self.page(actor, size=limit).items

    def page(self, actor: Actor, *, size: int, after: str | None = None) -> Page:
        """Narrowed in SQL by the eligibility rules (open review slots), then checked exactly
        with the rules a click is checked with; ``after``: continue after that request."""
        roles = self._roles(actor)
        found: list[ApprovalView] = []
        cursor, exhausted = after, False
        for _ in range(MAX_ROUNDS):
            chunk = size + 1 - len(found)
            with self.db.transaction() as s:
                requests = pending_records(
                    s,
                    reviewer=actor.user_id,
                    roles=roles,
                    own_roles=[REQUESTER_ROLE],
                    limit=chunk,
                    after=cursor,
                )
                views = [approval_view(r) for r in requests]
            found += [view for view in views if self.waits_on(view, actor)]
            if views:
                cursor = views[-1].id
            if len(views) < chunk:
                exhausted = True
                break
            if len(found) > size:
                break
        items = found[:size]
        if len(found) > size:
            return Page(items=items, next_after=items[-1].id)
        return Page(items=items, next_after=None if exhausted else cursor)

    def _roles(self, actor: Actor) -> list[str]:
        policy = self.policy.for_team(actor.team_id)
        return [  # "requester" counts on one's own requests only, as in is_eligible
            role
            for role in policy.roles
            if role != REQUESTER_ROLE
            and policy.is_member(actor.user_id, role, usergroup_members=self.usergroup_members)
        ]

    def waits_on(self, view: ApprovalView, actor: Actor) -> bool:
        return any(a.outcome is None and self.may_decide(view, a, actor) for a in view.actions)

    def may_decide(self, view: ApprovalView, action: ActionView, actor: Actor) -> bool:
        """The decision path's own check (``check_decision``) for each decision the action
        allows; and not an action the actor already signed off in its current version, which
        they could still veto but which no longer waits on them."""
        if actor.user_id in action.approvers:
            return False
        facts = ActionFacts(
            request_status=view.status,
            team_id=view.run.team_id,
            requester_id=view.requester_id,
            expires_at=view.expires_at,
            outcome=action.outcome,
            allowed_decisions=action.allowed_decisions,
            approver_roles=action.approver_roles,
            self_approval=False,
            approvers_so_far=frozenset(action.approvers),
        )
        now = self.clock()
        return any(
            check_decision(
                self.policy,
                facts,
                actor,
                decision,
                now=now,
                usergroup_members=self.usergroup_members,
            )
            is None
            for decision in action.allowed_decisions
        )
