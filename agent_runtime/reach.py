"""Who should hear that an approval needs them, and how: built from the policy's ids only.

A ping names the eligible reviewers who can act now: the approver roles of the open actions,
never the requester (even where ``self_approval`` lets them decide: they started it, and follow
their own thread), never someone whose approval of the current version already counts. Nothing
in it comes from the agent: ids are taken from the policy and must look like Slack ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.policy import REQUESTER_ROLE, Policy
from agent_runtime.views import ActionView, ApprovalView, Reviewers

USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")
GROUP_ID = re.compile(r"^S[A-Z0-9]{2,20}$")
MAX_EXPANDED = 30
"""A user group holding someone not to ping (or under ``notify: dm``) is reached member by
member, up to this many; a larger group is mentioned whole (reaching everyone beats reaching
nobody)."""


@dataclass(frozen=True)
class Reach:
    mention: Reviewers
    """Mentioned where the card is."""
    direct: tuple[str, ...]
    """Sent a direct message linking to the card."""

    def __bool__(self) -> bool:
        return bool(self.mention.users or self.mention.usergroups or self.direct)


@dataclass
class _Collected:
    mention_users: dict[str, None]
    mention_groups: dict[str, None]
    direct: dict[str, None]


class ReviewerReach:
    def __init__(
        self, *, policy: Policy, usergroup_members: Callable[[str], frozenset[str]]
    ) -> None:
        self.policy = policy
        self.usergroup_members = usergroup_members

    def of(self, view: ApprovalView, *, action_ids: Collection[str] | None = None) -> Reach:
        """The reviewers of the open actions (of ``action_ids`` only, if given)."""
        found = _Collected({}, {}, {})
        for action in view.actions:
            if action.outcome is not None or action.exempt:
                continue
            if action_ids is not None and action.id not in action_ids:
                continue
            skip = frozenset({view.requester_id, *action.approvers})
            for role in action.approver_roles:
                self._add_role(found, action, role, skip=skip, team_id=view.run.team_id)
        direct = [u for u in found.direct if u not in found.mention_users]  # one way each
        return Reach(
            mention=Reviewers(
                users=tuple(found.mention_users), usergroups=tuple(found.mention_groups)
            ),
            direct=tuple(direct),
        )

    def _add_role(
        self,
        found: _Collected,
        action: ActionView,
        role: str,
        *,
        skip: frozenset[str],
        team_id: str | None,
    ) -> None:
        policy = self.policy.for_team(team_id)
        spec = policy.roles.get(role)
        if role == REQUESTER_ROLE or spec is None:
            return
        how = policy.notify_for(action.tool_name, role)
        if how == "none":
            return
        users = [u for u in spec.users if USER_ID.match(u) and u not in skip]
        target = found.mention_users if how == "mention" else found.direct
        target.update(dict.fromkeys(users))
        for group in (g for g in spec.usergroups if GROUP_ID.match(g)):
            members = self._members(group)
            others = sorted(u for u in members - skip if USER_ID.match(u)) if members else []
            whole = not members or (how == "mention" and not members & skip)
            if whole or len(others) > MAX_EXPANDED:
                # Members unknown, nobody to leave out, or too many to reach one by one.
                found.mention_groups[group] = None
            else:
                target.update(dict.fromkeys(others))

    def _members(self, group: str) -> frozenset[str] | None:
        """``None`` when Slack cannot say right now."""
        try:
            return self.usergroup_members(group)
        except MembershipUnconfirmed:
            return None
