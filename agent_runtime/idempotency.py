"""Idempotency keys for approved tool calls, and running a side effect at most once per key.

The engine puts ``{operation fingerprint: key}`` in the graph config when it resumes; a tool looks
its own call up there. The key is tenant + operation id + reviewed action hash. Operators' own
tools follow the same contract: call ``run_once(ledger, config, tool_name, args, effect)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_runtime.faults import fault_point
from agent_runtime.recording import operation_id
from store.ledger import EffectLedger
from store.models import ApprovalRequest

CONFIG_KEY = "approval_keys"


Normalize = Callable[[str, dict[str, Any]], dict[str, Any]]


def keys_for(request: ApprovalRequest, normalize: Normalize) -> dict[str, str]:
    """Fingerprints of each approved call (as the model made it, and as edited) -> its key.
    ``normalize`` fills in the tool's defaults, as the tool itself sees its arguments."""
    keys: dict[str, str] = {}
    for action in request.actions:
        key = f"{request.team_id or '-'}:{action.operation_id}:{action.bound_hash}"
        for args in (action.args, action.edited_args):
            if args is not None:
                full = normalize(action.tool_name, args)
                keys[operation_id(request.run_id, action.tool_name, full)] = key
    return keys


def key_of(config: Mapping[str, Any], tool_name: str, args: dict[str, Any]) -> str | None:
    configurable = config.get("configurable") or {}
    keys = configurable.get(CONFIG_KEY) or {}
    thread_id = configurable.get("thread_id")
    if not keys or thread_id is None:
        return None
    return keys.get(operation_id(str(thread_id), tool_name, args))


def run_once(
    ledger: EffectLedger | None,
    config: Mapping[str, Any],
    tool_name: str,
    args: dict[str, Any],
    effect: Callable[[], str],
) -> str:
    """Run ``effect`` unless its key was already recorded; return the recorded result then."""
    key = key_of(config, tool_name, args) if ledger is not None else None
    if key is None or ledger is None:
        return effect()
    stored = ledger.result_of(key)
    if stored is not None:
        return stored
    fault_point("inside_tool")
    result = ledger.remember(key, tool=tool_name, result=effect())
    fault_point("after_tool")
    return result
