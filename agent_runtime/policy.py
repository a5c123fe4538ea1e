"""The approval policy: who may ask, which tools are gated, who may decide and how many must agree.

Pure data and pure functions; the file is validated with pydantic and refused at start when bad.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from agent_runtime.constraints import SHOWN_CHARS, ArgConstraint
from agent_runtime.errors import PolicyError

DecisionType = Literal["approve", "edit", "reject", "respond"]
Risk = Literal["none", "low", "medium", "high"]
Notify = Literal["mention", "dm", "none"]
"""How eligible reviewers hear that a card needs them: a mention where the card is, a direct
message linking to it, or nothing (they watch the channel themselves)."""
ChannelId = Annotated[str, Field(pattern=r"^[CG][A-Z0-9]{2,20}$")]
TeamId = Annotated[str, Field(pattern=r"^T[A-Z0-9]{2,20}$")]
REQUESTER_ROLE = "requester"
ADMINS_ROLE = "admins"
"""The role that administers runs (e.g. cancels anyone's run). It approves only the tools that
name it: it is never one of the "any role" approvers of a tool without its own."""
REDACTED = "[redacted]"
MIN_REDACTED = 3
"""Shorter values are not searched for in free text (they would match everywhere)."""
EVERYONE = "everyone"
BUNDLED_POLICY = Path(__file__).parent / "policy.example.yaml"
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(value: object) -> object:
    """``30m``, ``4h``, ``2d`` -> timedelta; other values are left for pydantic to judge."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a duration like 45s, 30m, 4h or 2d")
        return dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    return value


Duration = Annotated[dt.timedelta, BeforeValidator(parse_duration)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(_Strict):
    expires_after: Duration = dt.timedelta(hours=4)
    on_expiry: Literal["reject"] = "reject"
    remind_after: Duration | None = dt.timedelta(hours=1)
    escalation_channel: ChannelId | None = None
    notify: Notify = "mention"


Scalar = str | int | float | bool | None


class Condition(_Strict):
    """One argument test of a ``when``: equal to a value, or (not) one of several."""

    equals: Scalar = None
    in_: tuple[Scalar, ...] | None = Field(default=None, alias="in")
    not_in: tuple[Scalar, ...] | None = None

    def holds(self, value: object) -> bool:
        if self.in_ is not None:
            return value in self.in_
        if self.not_in is not None:
            return value not in self.not_in
        return value == self.equals


def _condition(value: object) -> object:
    """``{channel: public}`` is shorthand for ``{channel: {equals: public}}``."""
    return value if isinstance(value, dict) else {"equals": value}


When = dict[str, Annotated[Condition, BeforeValidator(_condition)]]


class Digest(_Strict):
    """Review in batches: pending approvals of these risk tiers are not posted as cards but
    collected, per channel, into one digest message (Approve / Reject per item) once the oldest
    of them has waited ``every``. High risk always gets its own card, so it cannot be listed."""

    risks: tuple[Literal["low", "medium"], ...] = Field(min_length=1)
    every: Duration

    @model_validator(mode="after")
    def _positive(self) -> Digest:
        if self.every <= dt.timedelta(0):
            raise ValueError("every must be a positive duration")
        return self


class Role(_Strict):
    users: tuple[str, ...] = ()
    usergroups: tuple[str, ...] = ()
    notify: Notify | None = None
    review_channel: ChannelId | None = None
    """Cards this role reviews are posted here (unless the tool names its own channel)."""


def quoted_forms(value: object) -> set[str]:
    """How text may quote ``value``: as it is, as JSON or Python's repr (which escape quotes,
    newlines and backslashes), and a long string as messages clip it."""
    forms = {json.dumps(value, default=str), repr(value)}
    if isinstance(value, str):
        forms |= {value, repr(value)[1:-1], json.dumps(value)[1:-1], value[:SHOWN_CHARS]}
        forms |= {json.dumps(value, ensure_ascii=False)[1:-1]}
    return {form for form in forms if len(form) >= MIN_REDACTED}


class ToolRule(_Strict):
    approval: Literal["required", "none"] = "required"
    risk: Risk = "medium"
    decisions: tuple[DecisionType, ...] = ("approve", "reject")
    approvers: tuple[str, ...] = ()
    approvals_required: int = Field(default=1, ge=1, le=10)
    self_approval: bool = False
    expires_after: Duration | None = None
    when: When | None = None
    notify: Notify | None = None
    """Overrides the approver roles' ``notify`` for this tool."""
    review_channel: ChannelId | None = None
    """Cards of this tool are posted here, with a link to the run's thread."""
    constraints: dict[str, ArgConstraint] | None = None
    """Per argument: allowed values, a pattern, allowed domains, a length limit, or locked (an
    edit may not change it). Checked on the call as proposed and again on every edit."""
    redact: tuple[str, ...] = ()
    """Arguments kept out of the audit log (a secret a reviewer may see but an export must
    not hold); the action hash still covers their real values."""

    def redacted(self, args: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """``args`` as the audit log keeps them."""
        if args is None:
            return None
        return {k: REDACTED if k in self.redact else v for k, v in args.items()}

    def redacted_text(self, text: str, *args: Mapping[str, Any] | None) -> str:
        """Free text that may quote the call (an interrupt's description, a tool's result, a
        reviewer's reason) with the redacted arguments' values taken out, in each set of
        ``args`` (e.g. as proposed and as edited) and however the text quotes them."""
        forms = {
            form
            for given in args
            for key in self.redact
            if (given or {}).get(key) is not None
            for form in quoted_forms((given or {})[key])
        }
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, REDACTED)
        return text

    @model_validator(mode="after")
    def _requester_only_answers(self) -> ToolRule:
        """The ``requester`` role lets the person who asked answer a question; for a tool that
        acts it would be self-approval without saying so (use ``self_approval``)."""
        if REQUESTER_ROLE in self.approvers and {"approve", "edit"} & set(self.decisions):
            raise ValueError(
                "the requester role may only answer (respond) or reject; to let requesters "
                "approve their own calls set self_approval: true"
            )
        return self

    @model_validator(mode="after")
    def _respond_only_answers(self) -> ToolRule:
        """``respond`` hands the agent a reviewer's text as if it were the tool's result: fine
        for ask-the-human tools, a forged result for a tool that acts."""
        if "respond" in self.decisions and {"approve", "edit"} & set(self.decisions):
            raise ValueError(
                "respond answers in place of the tool; a tool that can be approved or edited "
                "has side effects and must not allow it"
            )
        return self

    @property
    def gated(self) -> bool:
        return self.approval == "required" and self.risk != "none"

    def applies_to(self, args: dict[str, object]) -> bool:
        """Deterministic: the gate applies when every ``when`` condition holds on the arguments.
        Evaluated once, when the interrupt is recorded, and stored with the action."""
        if not self.gated:
            return False
        if not self.when:
            return True
        # An argument the call does not carry cannot exempt it (fail closed).
        return all(name not in args or cond.holds(args[name]) for name, cond in self.when.items())


class ReviewRule(_Strict):
    """Who reviews one kind of review a tool raises itself (e.g. ``sensitive_file_change``),
    instead of the tool's own approvers; unset fields keep the tool's."""

    approvers: tuple[str, ...] = Field(min_length=1)
    risk: Risk | None = None
    approvals_required: int | None = Field(default=None, ge=1, le=10)


class TeamSection(_Strict):
    """One workspace's own people (bot installed in several workspaces): its roles replace the
    top-level roles of the same names there; the tools' rules are shared."""

    roles: dict[str, Role] = {}


class Policy(_Strict):
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
