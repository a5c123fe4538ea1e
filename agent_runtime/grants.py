"""What the gate grants a call, and why it refuses one: the grant names the action it spends
and the effect's idempotency key; the reasons say, in the thread's words, what is missing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_runtime.in_flight import Hold
from agent_runtime.wire import action_hash
from store.call_looks import GatedAction


@dataclass(frozen=True)
class Grant:
    """Leave to run one approved action. ``key`` (tenant + operation id + reviewed action hash)
    is the effect's idempotency key: pass it on to systems that accept one."""

    action_id: str
    key: str
    stored_result: str | None
    hold: Hold | None = field(default=None, compare=False, repr=False)
    """This call's hold of the action while its effect may run (``InFlight``)."""


def bound_hash_of(action: GatedAction, tool_name: str, args: dict[str, Any]) -> str:
    """The hash of this call under the policy version the action was reviewed at."""
    return action_hash(tool_name, args, action.request.policy_version)


def idempotency_key(action: GatedAction) -> str:
    """Tenant + operation id + reviewed action hash: the side effect's idempotency key."""
    return f"{action.request.team_id or '-'}:{action.operation_id}:{action.bound_hash}"


def why_not(
    candidates: list[GatedAction], matching: list[GatedAction], *, current: list[GatedAction]
) -> str:
    """Why no approval could be spent: what differs between the call and what was approved."""
    if matching and not current:
        return "it was approved under an earlier version of the approval policy"
    if matching:
        return "its approval was already used by another call"
    if candidates:
        return "its arguments differ from the ones reviewers approved"
    return "no reviewer approved this call"
