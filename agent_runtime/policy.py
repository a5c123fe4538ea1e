"""The approval policy: who may ask, which tools are gated, who may decide and how many must agree.

Pure data and pure functions; the file is validated with pydantic and refused at start when bad.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, model_validator

from agent_runtime.errors import PolicyError
from agent_runtime.policy_rules import (
    ADMINS_ROLE,
    BUNDLED_POLICY,
    EVERYONE,
    REQUESTER_ROLE,
    ChannelId,
    Condition,
    DecisionType,
    Defaults,
    Digest,
    Duration,
    Notify,
    ReviewRule,
    Risk,
    Role,
    Scalar,
    Strict,
    TeamId,
    TeamSection,
    ToolRule,
    When,
    parse_duration,
)
from agent_runtime.redaction import MIN_REDACTED, REDACTED

__all__ = [
    "ADMINS_ROLE",
    "BUNDLED_POLICY",
    "EVERYONE",
    "MIN_REDACTED",
    "REDACTED",
    "REQUESTER_ROLE",
    "ChannelId",
    "Condition",
    "DecisionType",
    "Defaults",
    "Digest",
    "Duration",
    "Notify",
    "Policy",
    "ReviewRule",
    "Risk",
    "Role",
    "Scalar",
    "Strict",
    "TeamId",
    "TeamSection",
    "ToolRule",
    "When",
    "load_policy",
    "parse_duration",
]


class Policy(Strict):
    version: str = Field(min_length=1, max_length=64)
    environment: str | None = Field(default=None, min_length=1, max_length=64)
    """Where the agents' actions take effect (production, staging, ...): on every card and
    approval; an approval is not carried over when it changes."""
    defaults: Defaults = Defaults()
    roles: dict[str, Role] = {}
    requesters: tuple[str, ...] = (EVERYONE,)
    tools: dict[str, ToolRule] = {}
    reviews: dict[str, ReviewRule] = {}
    """By review kind (what a tool's own review interrupt says it is)."""
    digest: Digest | None = None
    """``None``: every approval gets its own card."""
    teams: dict[TeamId, TeamSection] = {}
    """Per workspace (Slack team id), roles of its own; ``for_team`` applies them."""

    @model_validator(mode="after")
    def _team_roles_exist(self) -> Policy:
        for team, section in self.teams.items():
            for role in section.roles:
                if role not in self.roles:
                    raise ValueError(
                        f"teams.{team}.roles names role {role!r}, which the top level does not "
                        "declare (declare it there, even with nobody in it)"
                    )
        return self

    def for_team(self, team_id: str | None) -> Policy:
        """The policy as one workspace sees it: its section's roles in place of the top-level
        roles of the same names (the others as they are)."""
        section = self.teams.get(team_id) if team_id else None
        if section is None or not section.roles:
            return self
        return self.model_copy(update={"roles": {**self.roles, **section.roles}})

    @model_validator(mode="after")
    def _digest_before_expiry(self) -> Policy:
        """A digested approval must be listed before it can expire: ``every`` is shorter than
        the expiry of each tool whose risk is digested (and of tools the policy does not name,
        which are medium risk and expire after the default)."""
        if self.digest is None:
            return self
        spans = {"defaults.expires_after": self.defaults.expires_after}
        for name, rule in self.tools.items():
            if rule.risk in self.digest.risks and rule.expires_after is not None:
                spans[f"tools.{name}.expires_after"] = rule.expires_after
        for where, span in spans.items():
            if self.digest.every >= span:
                raise ValueError(
                    f"digest.every ({self.digest.every}) must be shorter than {where} ({span}): "
                    "an approval would expire before its digest is posted"
                )
        return self

    def digested(self, tool_name: str) -> bool:
        """Whether a call of this tool may wait for the digest instead of its own card: its
        risk is digested, it is decided by approve/reject only, and one sign-off suffices
        (a digest row has no room for an edit form, a reason-less respond or a tally)."""
        if self.digest is None:
            return False
        rule = self.rule_for(tool_name)
        return (
            rule.gated
            and rule.risk in self.digest.risks
            and rule.approvals_required == 1
            and set(rule.decisions) <= {"approve", "reject"}
        )

    @model_validator(mode="after")
    def _roles_exist(self) -> Policy:
        known = set(self.roles) | {REQUESTER_ROLE}
        for name, rule in self.tools.items():
            for role in rule.approvers:
                if role not in known:
                    raise ValueError(f"tools.{name}.approvers names unknown role {role!r}")
            if rule.gated and not rule.approvers and not self.approver_roles:
                raise ValueError(f"tools.{name} is gated but no role could approve it")
        for kind, review in self.reviews.items():
            for role in review.approvers:
                if role not in known:
                    raise ValueError(f"reviews.{kind}.approvers names unknown role {role!r}")
        for role in self.requesters:
            if role not in known | {EVERYONE}:
                raise ValueError(f"requesters names unknown role {role!r}")
        return self

    def rule_for(self, tool_name: str) -> ToolRule:
        """The rule of a named tool; an unnamed tool is gated approve/reject by any role."""
        rule = self.tools.get(tool_name)
        if rule is None:
            return ToolRule(approvers=self.approver_roles, decisions=("approve", "reject"))
        if not rule.approvers:
            return rule.model_copy(update={"approvers": self.approver_roles})
        return rule

    def max_revisions_for(self, tool_name: str) -> int:
        chosen = self.rule_for(tool_name).max_revisions
        return chosen if chosen is not None else self.defaults.max_revisions

    def rule_for_review(self, tool_name: str, kind: str | None) -> ToolRule:
        """The tool's rule, with the approvers (and risk, sign-offs) of its review kind when
        the policy routes that kind to reviewers of its own. Checked like any tool rule."""
        rule = self.rule_for(tool_name)
        review = self.reviews.get(kind) if kind else None
        if review is None:
            return rule
        routed = {k: v for k, v in review.model_dump().items() if v is not None}
        return ToolRule.model_validate({**rule.model_dump(by_alias=True), **routed})

    @property
    def approver_roles(self) -> tuple[str, ...]:
        """The roles that approve a tool naming none: every role but ``admins``."""
        return tuple(r for r in self.roles if r != ADMINS_ROLE)

    def is_admin(self, user_id: str, *, usergroup_members: Callable[[str], frozenset[str]]) -> bool:
        """Whether ``user_id`` holds the ``admins`` role (the one check every admin-only
        operation uses). May ask for user group members: call it outside transactions."""
        return self.is_member(user_id, ADMINS_ROLE, usergroup_members=usergroup_members)

    def expires_after(self, tool_names: Iterable[str]) -> dt.timedelta:
        """An interrupt expires with its most urgent action."""
        spans = [self.rule_for(n).expires_after or self.defaults.expires_after for n in tool_names]
        return min(spans, default=self.defaults.expires_after)

    def notify_for(self, tool_name: str, role: str) -> Notify:
        """The tool's choice, else the role's, else the default."""
        spec = self.roles.get(role)
        return (
            self.rule_for(tool_name).notify
            or (spec.notify if spec is not None else None)
            or self.defaults.notify
        )

    def review_channel_for(self, tool_name: str) -> str | None:
        """The tool's review channel, else that of the first of its approver roles naming one;
        ``None``: the card goes to the run's thread."""
        rule = self.rule_for(tool_name)
        if rule.review_channel:
            return rule.review_channel
        specs = (self.roles.get(role) for role in rule.approvers)
        return next((s.review_channel for s in specs if s is not None and s.review_channel), None)

    def is_member(
        self, user_id: str, role: str, *, usergroup_members: Callable[[str], frozenset[str]]
    ) -> bool:
        spec = self.roles.get(role)
        if spec is None:
            return False
        if user_id in spec.users:
            return True
        return any(user_id in usergroup_members(group) for group in spec.usergroups)

    def groups_to_check(self, user_id: str, roles: Iterable[str]) -> list[str]:
        """The user groups ``is_member`` may consult to tell whether ``user_id`` holds one of
        ``roles`` (taken in order): none beyond the first role that names the user directly."""
        groups: list[str] = []
        for role in roles:
            spec = self.roles.get(role)
            if spec is None:
                continue
            if user_id in spec.users:
                break
            groups.extend(g for g in spec.usergroups if g not in groups)
        return groups

    def may_request(
        self, user_id: str, *, usergroup_members: Callable[[str], frozenset[str]]
    ) -> bool:
        if EVERYONE in self.requesters:
            return True
        return any(
            self.is_member(user_id, role, usergroup_members=usergroup_members)
            for role in self.requesters
        )


def load_policy(path: str | Path | None) -> Policy:
    """Read and validate a policy file; any problem becomes one PolicyError naming the field."""
    source = Path(path) if path else BUNDLED_POLICY
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"POLICY_FILE {source}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise PolicyError(f"POLICY_FILE {source}: not valid YAML ({detail})") from exc
    if not isinstance(data, dict):
        raise PolicyError(f"POLICY_FILE {source}: expected a mapping at the top level")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise PolicyError(f"POLICY_FILE {source}: {where}: {first['msg']}") from exc
