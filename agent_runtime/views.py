"""Read-only snapshots handed to the notifier: what a card or a thread message needs to show."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent_runtime.view_sources import ActionSource, RequestSource, RunSource


@dataclass(frozen=True)
class DecisionView:
    reviewer_id: str
    type: str
    message: str | None
    at: dt.datetime
    action_hash: str = ""


@dataclass(frozen=True)
class Reviewers:
    """Who can still move an approval forward: for reminders, built from the policy."""

    users: tuple[str, ...]
    usergroups: tuple[str, ...]


@dataclass(frozen=True)
class ActionView:
    id: str
    position: int
    tool_name: str
    args: dict[str, Any]
    description: str
    risk: str
    allowed_decisions: tuple[str, ...]
    approver_roles: tuple[str, ...]
    approvals_required: int
    action_hash: str
    operation_id: str
    outcome: str | None
    decisions: tuple[DecisionView, ...]
    exempt: bool = False
    edited_args: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    tool_call_id: str | None = None
    tool_version: str | None = None

    @property
    def approvals(self) -> tuple[DecisionView, ...]:
        """Approvals that still count: given to the action as it is now (same hash)."""
        return tuple(
            d
            for d in self.decisions
            if d.type in ("approve", "edit") and d.action_hash == self.action_hash
        )

    @property
    def approvers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.reviewer_id for d in self.approvals))


@dataclass(frozen=True)
class RunView:
    id: str
    requester_id: str
    channel_id: str
    thread_ts: str | None
    request_text: str
    status: str
    result_text: str | None
    cancelled_by: str | None = None
    cancelled_at: dt.datetime | None = None
    team_id: str | None = None
    """The Slack workspace of the run: its messages go through that workspace's token."""


@dataclass(frozen=True)
class ApprovalView:
    id: str
    run: RunView
    status: str
    outcome: str | None
    interrupt_id: str
    policy_version: str
    requester_id: str
    expires_at: dt.datetime
    card_channel: str | None
    card_ts: str | None
    actions: tuple[ActionView, ...]
    review_channel: str | None = None
    """Where the policy sends the card; ``None``: the run's thread."""
    digest_channel: str | None = None
    """Set when the request is reviewed in that channel's digest instead of on a card."""
    environment: str | None = None

    @property
    def away_from_run(self) -> bool:
        """The card lives in a review channel, not in the run's thread."""
        return bool(self.review_channel) and self.review_channel != self.run.channel_id

    @property
    def card_channels(self) -> tuple[str, ...]:
        """Where people can see this card: a click from anywhere else reads nothing."""
        found = (self.run.channel_id, self.review_channel, self.card_channel, self.digest_channel)
        return tuple(dict.fromkeys(c for c in found if c))

    @property
    def approvable(self) -> tuple[ActionView, ...]:
        """Open actions that an approve could decide now."""
        return tuple(
            a for a in self.actions if a.outcome is None and "approve" in a.allowed_decisions
        )


def versions_digest(actions: Iterable[ActionView]) -> str:
    """One fingerprint of several actions at their current versions: what an "Approve all"
    button covered when it was drawn. Any edit, decision or new action changes it."""
    payload = "|".join(sorted(f"{a.id}={a.action_hash}" for a in actions))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def run_view(run: RunSource) -> RunView:
    return RunView(
        id=run.id,
        requester_id=run.requester_id,
        channel_id=run.channel_id,
        thread_ts=run.thread_ts,
        request_text=run.request_text,
        status=run.status,
        result_text=run.result_text,
        cancelled_by=run.cancelled_by,
        cancelled_at=run.cancelled_at,
        team_id=run.team_id,
    )


def action_view(action: ActionSource) -> ActionView:
    return ActionView(
        id=action.id,
        position=action.position,
        tool_name=action.tool_name,
        args=dict(action.args),
        description=action.description,
        risk=action.risk,
        allowed_decisions=tuple(action.allowed_decisions),
        approver_roles=tuple(action.approver_roles),
        approvals_required=action.approvals_required,
        action_hash=action.bound_hash,
        operation_id=action.operation_id,
        outcome=action.outcome,
        exempt=action.exempt,
        edited_args=dict(action.edited_args) if action.edited_args is not None else None,
        extra=dict(action.extra) if action.extra else None,
        tool_call_id=action.tool_call_id,
        tool_version=action.tool_version,
        decisions=tuple(
            DecisionView(
                reviewer_id=d.reviewer_id,
                type=d.type,
                message=d.message,
                at=d.created_at,
                action_hash=d.action_hash,
            )
            for d in action.decisions
        ),
    )


def approval_view(request: RequestSource) -> ApprovalView:
    return ApprovalView(
        id=request.id,
        run=run_view(request.run),
        status=request.status,
        outcome=request.outcome,
        interrupt_id=request.interrupt_id,
        policy_version=request.policy_version,
        requester_id=request.requester_id,
        expires_at=request.expires_at,
        card_channel=request.card_channel,
        card_ts=request.card_ts,
        actions=tuple(action_view(a) for a in request.actions),
        review_channel=request.review_channel,
        digest_channel=request.digest_channel,
        environment=request.environment,
    )


@dataclass(frozen=True)
class DigestView:
    """One digest message: the approvals it lists, as they are now."""

    id: str
    channel: str
    ts: str | None
    approvals: tuple[ApprovalView, ...]
    team_id: str | None = None

    @property
    def fingerprint(self) -> str:
        """What the message shows: any decision, edit, expiry or close changes it."""
        parts = [
            f"{a.id}:{a.status}:"
            + ",".join(f"{x.id}={x.outcome}/{len(x.decisions)}" for x in a.actions)
            for a in self.approvals
        ]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
