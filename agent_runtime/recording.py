"""Turning a pending interrupt into an approval request, with the policy that applies to it."""

from __future__ import annotations

import datetime as dt
import hashlib

from agent_runtime.policy import Policy
from agent_runtime.wire import PendingInterrupt, action_hash, canonical_json
from store.models import Action, ApprovalRequest, Run, new_id


def operation_id(run_id: str, name: str, args: dict) -> str:
    """The business key of an action: stable across re-plans, unlike the tool-call id."""
    digest = hashlib.sha256(f"{run_id}|{name}|{canonical_json(args)}".encode())
    return "op_" + digest.hexdigest()[:29]


def allowed_decisions(offered: tuple[str, ...], policy_allows: tuple[str, ...]) -> list[str]:
    """Only what both the graph and the policy allow; reject always stays possible if offered."""
    both = [d for d in offered if d in policy_allows]
    if both:
        return both
    return ["reject"] if "reject" in offered else list(offered)


def build_request(
    run: Run,
    pending: PendingInterrupt,
    *,
    policy: Policy,
    now: dt.datetime,
    tool_call_ids: list[str | None],
    subagent: str | None = None,
) -> tuple[ApprovalRequest, list[Action]]:
    expires_at = now + policy.expires_after(a.name for a in pending.actions)
    remind_after = policy.defaults.remind_after
    remind_at = now + remind_after if remind_after else None
    request = ApprovalRequest(
        id=new_id("apr"),
        run_id=run.id,
        interrupt_id=pending.interrupt_id,
        kind=pending.kind,
        status="pending",
        policy_version=policy.version,
        team_id=run.team_id,
        enterprise_id=run.enterprise_id,
        requester_id=run.requester_id,
        expires_at=expires_at,
        remind_at=remind_at if remind_at and remind_at < expires_at else None,
        created_at=now,
    )
    actions = []
    for position, (spec, call_id) in enumerate(zip(pending.actions, tool_call_ids, strict=True)):
        rule = policy.rule_for(spec.name)
        exempt = not rule.applies_to(spec.args)
        actions.append(
            Action(
                id=new_id("act"),
                position=position,
                tool_name=spec.name,
                args=spec.args,
                description=spec.description,
                allowed_decisions=allowed_decisions(spec.allowed_decisions, rule.decisions),
                approver_roles=list(rule.approvers),
                approvals_required=rule.approvals_required,
                self_approval=rule.self_approval,
                risk=rule.risk,
                action_hash=action_hash(spec.name, spec.args, policy.version),
                operation_id=operation_id(run.id, spec.name, spec.args),
                tool_call_id=call_id,
                exempt=exempt,
                extra={**(spec.extra or {}), **({"subagent": subagent} if subagent else {})}
                or None,
                outcome="approved" if exempt else None,
            )
        )
    return request, actions


def drift(request: ApprovalRequest, pending: PendingInterrupt) -> str | None:
    """Why the checkpoint's pending actions differ from what reviewers saw, or None."""
    if len(request.actions) != len(pending.actions):
        return "the number of actions changed since the card was posted"
    for recorded, spec in zip(request.actions, pending.actions, strict=True):
        if action_hash(spec.name, spec.args, request.policy_version) != recorded.action_hash:
            return f"{spec.name} changed since it was reviewed"
    return None
