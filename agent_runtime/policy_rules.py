"""The parts of an approval policy: roles, tool rules, review routing, workspace sections and
defaults. ``agent_runtime.policy`` assembles them into a ``Policy`` and loads the file."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from agent_runtime.constraints import ArgConstraint
from agent_runtime.redaction import REDACTED, check_path, redact, taken_forms

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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(Strict):
    expires_after: Duration = dt.timedelta(hours=4)
    on_expiry: Literal["reject"] = "reject"
    remind_after: Duration | None = dt.timedelta(hours=1)
    escalation_channel: ChannelId | None = None
    notify: Notify = "mention"
    max_revisions: int = Field(default=2, ge=0, le=10)
    """How many corrected calls an agent may propose after a tool's call is rejected in one
    run; one more is refused by the policy without asking anyone."""
    max_policy_refusals: int = Field(default=5, ge=1, le=100)
    """How many proposals in a row with a call the policy refuses (a constraint broken,
    revisions used up) a run may make before it is stopped: each refusal is answered at once,
    without anyone, so an agent that keeps proposing such calls would otherwise loop for
    ever."""


Scalar = str | int | float | bool | None


class Condition(Strict):
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


class Digest(Strict):
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


class Role(Strict):
    users: tuple[str, ...] = ()
    usergroups: tuple[str, ...] = ()
    notify: Notify | None = None
    review_channel: ChannelId | None = None
    """Cards this role reviews are posted here (unless the tool names its own channel)."""


RedactPath = Annotated[str, AfterValidator(check_path)]


class ToolRule(Strict):
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
    max_revisions: int | None = Field(default=None, ge=0, le=10)
    """Overrides ``defaults.max_revisions`` for this tool."""
    redact: tuple[RedactPath, ...] = ()
    """Values kept out of the audit log (a secret a reviewer may see but an export must not
    hold), by argument name or by a dotted path into one (``headers.authorization``; a list
    met on the way is entered element by element). The action hash still covers the real
    values."""

    def redacted(self, args: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """``args`` as the audit log keeps them."""
        if args is None:
            return None
        return redact(args, self.redact)[0] if self.redact else dict(args)

    def redacted_text(self, text: str, *args: Mapping[str, Any] | None) -> str:
        """Free text that may quote the call (an interrupt's description, a tool's result, a
        reviewer's reason) with the redacted values taken out, in each set of ``args`` (e.g.
        as proposed and as edited) and however the text quotes them."""
        if not self.redact:
            return text
        forms = {
            form
            for given in args
            if given
            for value in redact(given, self.redact)[1]
            for form in taken_forms(value)
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


class ReviewRule(Strict):
    """Who reviews one kind of review a tool raises itself (e.g. ``sensitive_file_change``),
    instead of the tool's own approvers; unset fields keep the tool's."""

    approvers: tuple[str, ...] = Field(min_length=1)
    risk: Risk | None = None
    approvals_required: int | None = Field(default=None, ge=1, le=10)


class TeamSection(Strict):
    """One workspace's own people (bot installed in several workspaces): its roles replace the
    top-level roles of the same names there; the tools' rules are shared."""

    roles: dict[str, Role] = {}
