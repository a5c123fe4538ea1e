"""Turning a pending interrupt into an approval request, with the policy that applies to it.

Arguments are normalized once, here (schema applied, defaults filled, types coerced), and the
normalized arguments are what ``when`` conditions, constraints, hashes, cards and the
point-of-effect gate all see.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from agent_runtime.catalog import ArgsState, ToolCatalog, ToolVersions
from agent_runtime.constraints import violations
from agent_runtime.policy import Policy, ToolRule
from agent_runtime.revisions import REVISION, over_the_limit, revision_of
from agent_runtime.wire import ActionSpec, PendingInterrupt, action_hash, canonical_json
from store.models import Action, ApprovalRequest, Run, new_id
from store.statuses import ActionOutcome, RequestStatus

POLICY_VETO = "policy_violation"
"""``Action.extra`` key: why the policy refused the call as proposed (rejected, never shown as
approvable)."""


def operation_id(run_id: str, name: str, args: Mapping[str, Any], occurrence: int = 0) -> str:
    """The business key of an action: stable across re-plans, unlike the tool-call id. The n-th
    identical call of a run gets its own key, so two approved identical calls are two effects."""
    seed = f"{run_id}|{name}|{canonical_json(dict(args))}|{occurrence}"
    return "op_" + hashlib.sha256(seed.encode()).hexdigest()[:29]


def allowed_decisions(offered: tuple[str, ...], policy_allows: tuple[str, ...]) -> list[str]:
    """Only what both the graph and the policy allow. When they share nothing, only a reject
    the graph accepts is left (fail closed): the action can be refused or left to expire."""
    both = [d for d in offered if d in policy_allows]
    if both:
        return both
    return ["reject"] if "reject" in offered else []


def build_request(
    run: Run,
    pending: PendingInterrupt,
    *,
    policy: Policy,
    catalog: ToolCatalog,
    now: dt.datetime,
    tool_call_ids: list[str | None],
    taken_operations: Collection[str] = (),
    subagent: str | None = None,
    rejected: Sequence[Action] = (),
    turn_call_ids: Sequence[str] = (),
) -> tuple[ApprovalRequest, list[Action]]:
    """``rejected``: the run's calls reviewers rejected so far (a new call of the same tool is
    their revision, shown as such and bounded by the policy); ``turn_call_ids``: the ids of
    every call of the model turn, reviewed or not (as the store keeps them)."""
    expires_at = now + policy.expires_after(a.name for a in pending.actions)
    remind_after = policy.defaults.remind_after
    remind_at = now + remind_after if remind_after else None
    request = ApprovalRequest(
        id=new_id("apr"),
        run_id=run.id,
        interrupt_id=pending.interrupt_id,
        kind=pending.kind,
        status=RequestStatus.PENDING,
        policy_version=policy.version,
        environment=policy.environment,
        team_id=run.team_id,
        enterprise_id=run.enterprise_id,
        requester_id=run.requester_id,
        expires_at=expires_at,
        remind_at=remind_at if remind_at and remind_at < expires_at else None,
        created_at=now,
    )
    taken = set(taken_operations)
    actions: list[Action] = []
    for position, (spec, call_id) in enumerate(zip(pending.actions, tool_call_ids, strict=True)):
        action = _action(run, spec, policy=policy, catalog=catalog, taken=taken, rejected=rejected)
        action.position, action.tool_call_id = position, call_id
        if subagent:
            action.extra = {**(action.extra or {}), "subagent": subagent}
        actions.append(action)
    _refuse_shared_ids(actions, turn=() if subagent else turn_call_ids)
    request.review_channel = _review_channel(policy.for_team(run.team_id), actions)
    if digestible(policy, actions):
        request.digest_channel = request.review_channel or run.channel_id
        if request.remind_at is not None and policy.digest is not None:
            # Nobody is reminded of an approval before its digest can show it.
            later = request.remind_at + policy.digest.every
            request.remind_at = later if later < expires_at else None
    return request, actions


MAX_DIGEST_ACTIONS = 20
"""The most rows (actions not exempt, open or already decided) one digest message lists, and
so the most a digested request may have: two blocks each keeps a digest within a chat
message's 50 blocks."""


def digestible(policy: Policy, actions: list[Action]) -> bool:
    """Every action waiting on people is digested by the policy and can be approved as
    recorded (one with schema errors needs its card: it shows them and offers only reject)."""
    waiting = [a for a in actions if a.outcome is None]
    rows = [a for a in actions if not a.exempt]  # the digest shows each, decided or not
    return (
        len(waiting) > 0
        and len(rows) <= MAX_DIGEST_ACTIONS
        and all(policy.digested(a.tool_name) for a in waiting)
        and all(
            "approve" in a.allowed_decisions and set(a.allowed_decisions) <= {"approve", "reject"}
            for a in waiting
        )
    )


def _review_channel(policy: Policy, actions: list[Action]) -> str | None:
    """The first action that waits on people and whose policy names a review channel decides
    where the one card of the interrupt goes."""
    waiting = (a.tool_name for a in actions if a.outcome is None)
    return next((c for c in map(policy.review_channel_for, waiting) if c), None)


def _action(
    run: Run,
    spec: ActionSpec,
    *,
    policy: Policy,
    catalog: ToolCatalog,
    taken: set[str],
    rejected: Sequence[Action],
) -> Action:
    kind = (spec.extra or {}).get("review_kind")
    rule = policy.rule_for_review(spec.name, str(kind) if kind else None)
    args, state = catalog.normalize_or_raw(spec.name, spec.args)
    extra: dict[str, Any] = dict(spec.extra or {})
    offered = allowed_decisions(spec.allowed_decisions, rule.decisions)
    if state is ArgsState.INVALID:
        # Not what the tool accepts: it can be fixed by an edit or rejected, never approved.
        extra["schema_errors"] = catalog.errors(spec.name, spec.args)
        offered = [d for d in offered if d != "approve"]
    revision = revision_of(spec.name, rejected) if rule.gated else None
    if revision is not None:
        extra[REVISION] = revision
    # Constraints apply whether or not the call needs a review; so does the revision limit.
    veto = _veto(rule, args) or over_the_limit(revision, policy.max_revisions_for(spec.name))
    exempt = not veto and state is ArgsState.VALID and not rule.applies_to(args)
    if veto:
        extra[POLICY_VETO] = veto
    occurrence = 0
    while operation_id(run.id, spec.name, args, occurrence) in taken:
        occurrence += 1
    op = operation_id(run.id, spec.name, args, occurrence)
    taken.add(op)
    versions = catalog.versions(spec.name)
    return Action(
        id=new_id("act"),
        tool_name=spec.name,
        args=args,
        description=spec.description,
        allowed_decisions=offered,
        approver_roles=list(rule.approvers),
        approvals_required=rule.approvals_required,
        self_approval=rule.self_approval,
        risk=rule.risk,
        action_hash=action_hash(spec.name, args, policy.version),
        operation_id=op,
        tool_version=versions.tool,
        schema_version=versions.schema,
        exempt=exempt,
        extra=extra or None,
        outcome=ActionOutcome.APPROVED if exempt else (ActionOutcome.REJECTED if veto else None),
    )


def _refuse_shared_ids(actions: list[Action], *, turn: Sequence[str]) -> None:
    """Calls under a tool-call id that another call of the model's turn goes by, reviewed or
    not: the gate knows a call by its id, and so do the agent's review middleware (a reject
    of one drops them all) and the record of what each returned, so no decision on one could
    be told apart from a decision on another. When one of them needs people, each of them
    here is refused as the policy refuses a call (an exempt one too: it would be dropped with
    the others and credited with their answer), and the agent is told why; calls all exempt
    from review are left alone (a refusal would count towards stopping the agent). ``turn``:
    that turn's ids, when they hold every reviewed one (a subagent's calls are not in its
    parent's turn)."""
    reviewed = [a.tool_call_id for a in actions if a.tool_call_id]
    ids = list(turn) if turn and set(reviewed) <= set(turn) else reviewed
    for call_id in {i for i in reviewed if ids.count(i) > 1}:
        group = [a for a in actions if a.tool_call_id == call_id]
        if all(a.exempt for a in group):
            continue  # nobody reviews them: no decision of anyone's to tell apart
        for action in group:
            _refuse(action, call_id)


def _refuse(action: Action, call_id: str) -> None:
    reason = (
        f"the agent sent the tool-call id {call_id[:80]} for more than one call in one message; "
        "a call can only be reviewed under an id of its own"
    )
    earlier = (action.extra or {}).get(POLICY_VETO)  # a constraint's, say: kept first
    vetoed = f"{earlier} {reason}" if earlier else reason
    action.extra = {**(action.extra or {}), POLICY_VETO: vetoed}
    action.exempt, action.outcome = False, ActionOutcome.REJECTED


def _veto(rule: ToolRule, args: Mapping[str, Any]) -> str | None:
    found = violations(rule.constraints, args)
    return " ".join(found.values()) if found else None


Normalizer = Callable[[str, Mapping[str, Any]], tuple[dict[str, Any], ArgsState]]


class ReviewedActionSource(Protocol):
    """What ``version_drift`` reads of an action: the versions it was reviewed at."""

    @property
    def tool_name(self) -> str: ...

    @property
    def tool_version(self) -> str | None: ...

    @property
    def schema_version(self) -> str | None: ...


class ReviewedRequestSource(Protocol):
    """What ``version_drift`` reads of a request (a stored one, or the gate's plain read)."""

    @property
    def environment(self) -> str | None: ...

    @property
    def actions(self) -> Sequence[ReviewedActionSource]: ...


def version_drift(
    request: ReviewedRequestSource,
    *,
    environment: str | None,
    versions: Callable[[str], ToolVersions],
) -> str | None:
    """Why what reviewers approved no longer holds though its arguments did not change: the
    environment or a tool was redeployed since (a new version, a new argument schema)."""
    if request.environment != environment:
        return (
            f"the environment changed from {request.environment or 'unset'} to "
            f"{environment or 'unset'} since it was reviewed"
        )
    for action in request.actions:
        now = versions(action.tool_name)
        if action.tool_version != now.tool:
            return (
                f"{action.tool_name} changed from version {action.tool_version or 'unset'} "
                f"to {now.tool or 'unset'} since it was reviewed"
            )
        if action.schema_version != now.schema:
            return f"the arguments {action.tool_name} takes changed since it was reviewed"
    return None


def drift(request: ApprovalRequest, pending: PendingInterrupt, normalize: Normalizer) -> str | None:
    """Why the checkpoint's pending actions differ from what reviewers saw, or None."""
    if len(request.actions) != len(pending.actions):
        return "the number of actions changed since the card was posted"
    for recorded, spec in zip(request.actions, pending.actions, strict=True):
        args, _valid = normalize(spec.name, spec.args)
        if action_hash(spec.name, args, request.policy_version) != recorded.action_hash:
            return f"{spec.name} changed since it was reviewed"
    return None


def audit_text(policy: Policy, text: str, actions: Iterable[Action]) -> str:
    """``text`` (an error, an outcome) as the audit keeps it: without the values the policy
    redacts in any of ``actions``' arguments, as proposed or as edited."""
    for action in actions:
        rule = policy.rule_for(action.tool_name)
        text = rule.redacted_text(text, action.args, action.edited_args)
    return text


def audited_actions(actions: list[Action], policy: Policy) -> list[dict[str, object]]:
    """What reviewers are shown, as the audit keeps it: the call (secrets redacted per the
    policy), its tool-call id, the interrupt's own description, and its hash."""
    audited: list[dict[str, object]] = []
    for a in actions:
        rule = policy.rule_for(a.tool_name)
        veto = (a.extra or {}).get(POLICY_VETO)
        audited.append(
            {
                "tool": a.tool_name,
                "args": rule.redacted(a.args),
                "tool_call_id": a.tool_call_id,
                "description": rule.redacted_text(a.description, a.args)[:1000],
                "hash": a.action_hash,
                "exempt": a.exempt,
                "policy_violation": rule.redacted_text(veto, a.args) if veto else None,
            }
        )
    return audited
