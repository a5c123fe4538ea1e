"""The LangGraph wire format, parsed and built in this one module.

Interrupt values (``HITLRequest`` batches and per-call ``tool_approval`` requests) become
``PendingInterrupt``; recorded decisions become ``Command(resume=...)``. Decisions are validated
here in full before anything reaches the checkpointer, because LangGraph saves a bad answer first
and fails afterwards, poisoning the thread.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.types import Command, Interrupt

from agent_runtime.errors import InvalidDecisions, UnsupportedInterrupt

InterruptKind = Literal["hitl_batch", "tool_approval", "review"]
REVIEW_TYPE = "review"
_DECISION_TYPES = frozenset({"approve", "edit", "reject", "respond"})
MESSAGES = "messages"
STOP_KEYS = (MESSAGES,)
"""What the engine reads of a thread's values where it stopped: the messages, for its answer
(``final_text``), the tool results, and the calls under review."""


@dataclass(frozen=True)
class ActionSpec:
    name: str
    args: dict[str, Any]
    description: str
    allowed_decisions: tuple[str, ...]
    tool_call_id: str | None = None
    extra: dict[str, Any] | None = None
    """Shown to reviewers, never trusted: a review's kind and preview, the subagent's name."""


@dataclass(frozen=True)
class PendingInterrupt:
    interrupt_id: str
    kind: InterruptKind
    actions: tuple[ActionSpec, ...]


@dataclass(frozen=True)
class ResumeDecision:
    type: str
    message: str | None = None
    edited_args: dict[str, Any] | None = None


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def action_hash(name: str, args: Mapping[str, Any], policy_version: str) -> str:
    """What an approval binds to: tool name, canonical arguments and the policy version."""
    payload = canonical_json({"tool": name, "args": dict(args), "policy": policy_version})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def parse_interrupt(item: Interrupt) -> PendingInterrupt:
    pending = _parse_any(item)
    for action in pending.actions:
        _require_json(item.id, action)
    return pending


def _parse_any(item: Interrupt) -> PendingInterrupt:
    value = item.value
    if not isinstance(value, Mapping):
        raise UnsupportedInterrupt(f"interrupt {item.id} carries a {type(value).__name__}")
    if value.get("type") == "tool_approval":
        return _parse_tool_approval(item.id, value)
    if value.get("type") == REVIEW_TYPE:
        return _parse_review(item.id, value)
    if "action_requests" in value and "review_configs" in value:
        return _parse_batch(item.id, value)
    raise UnsupportedInterrupt(f"interrupt {item.id} is not a HITL request")


def _require_json(interrupt_id: str, action: ActionSpec) -> None:
    """A model can propose NaN or Infinity; JSON cannot hold them, so such a call could be
    neither stored as proposed nor shown to reviewers as it would run."""
    try:
        json.dumps(dict(action.args), allow_nan=False, default=str)
    except ValueError:
        raise UnsupportedInterrupt(
            f"interrupt {interrupt_id}: the arguments of {action.name!r} contain a number "
            "that JSON cannot hold (NaN or Infinity)"
        ) from None


def _parse_batch(interrupt_id: str, value: Mapping[str, Any]) -> PendingInterrupt:
    requests, configs = value["action_requests"], value["review_configs"]
    if not isinstance(requests, list) or not isinstance(configs, list) or not requests:
        raise UnsupportedInterrupt(f"interrupt {interrupt_id}: malformed HITL request")
    by_name = {c.get("action_name"): c for c in configs if isinstance(c, Mapping)}
    actions = []
    for req in requests:
        name = str(req.get("name", ""))
        config = by_name.get(name)
        if config is None or not isinstance(req.get("args"), Mapping):
            raise UnsupportedInterrupt(f"interrupt {interrupt_id}: no review config for {name!r}")
        actions.append(
            ActionSpec(
                name=name,
                args=dict(req["args"]),
                description=_own_words(str(req.get("description", "")), name),
                allowed_decisions=_allowed(config.get("allowed_decisions"), interrupt_id),
            )
        )
    return PendingInterrupt(interrupt_id=interrupt_id, kind="hitl_batch", actions=tuple(actions))


def _own_words(description: str, name: str) -> str:
    """The middleware's stock description (a prefix, then ``Tool: <name>`` and ``Args: ...``)
    repeats what the card already shows: only a description written for the action is kept."""
    return "" if f"\n\nTool: {name}\nArgs: " in description else description


def _parse_tool_approval(interrupt_id: str, value: Mapping[str, Any]) -> PendingInterrupt:
    """Per-call interrupts carry no allowed list; it comes from the policy at record time."""
    if not isinstance(value.get("args"), Mapping):
        raise UnsupportedInterrupt(f"interrupt {interrupt_id}: tool_approval without args")
    spec = ActionSpec(
        name=str(value.get("name", "")),
        args=dict(value["args"]),
        description=str(value.get("description", "")),
        allowed_decisions=("approve", "edit", "reject", "respond"),
        tool_call_id=value.get("tool_call_id"),
    )
    return PendingInterrupt(interrupt_id=interrupt_id, kind="tool_approval", actions=(spec,))


def _parse_review(interrupt_id: str, value: Mapping[str, Any]) -> PendingInterrupt:
    """A tool's own ``interrupt({"type": "review", ...})``: see ``review_request``."""
    action = value.get("action")
    if not isinstance(action, Mapping) or not isinstance(action.get("args"), Mapping):
        raise UnsupportedInterrupt(f"interrupt {interrupt_id}: review without an action")
    spec = ActionSpec(
        name=str(action.get("name", "")),
        args=dict(action["args"]),
        description=str(value.get("description", "")),
        allowed_decisions=_allowed(
            value.get("allowed_decisions", ["approve", "reject"]), interrupt_id
        ),
        extra={
            "review_kind": str(value.get("kind", "review")),
            "preview": str(value.get("preview", ""))[:20_000],
            **(
                {"evidence": dict(value["evidence"])}
                if isinstance(value.get("evidence"), Mapping)
                else {}
            ),
        },
    )
    return PendingInterrupt(interrupt_id=interrupt_id, kind="review", actions=(spec,))


def review_request(
    *,
    kind: str,
    name: str,
    args: dict[str, Any],
    description: str,
    preview: str = "",
    allowed_decisions: Sequence[str] = ("approve", "edit", "reject"),
    evidence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload a tool passes to ``interrupt()`` to ask for a review of its own.

    The answer it gets back is one of ``{"type": "approve"}``,
    ``{"type": "edit", "args": {...}}``, ``{"type": "reject", "message": "..."}`` or
    ``{"type": "respond", "message": "..."}``.
    """
    return {
        "type": REVIEW_TYPE,
        "kind": kind,
        "description": description,
        "preview": preview,
        "action": {"name": name, "args": args},
        "allowed_decisions": list(allowed_decisions),
        **({"evidence": evidence} if evidence else {}),
    }


def _allowed(raw: object, interrupt_id: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not set(raw) <= _DECISION_TYPES:
        raise UnsupportedInterrupt(f"interrupt {interrupt_id}: bad allowed_decisions {raw!r}")
    return tuple(raw)


def pending_interrupts(interrupts: Sequence[Interrupt]) -> list[PendingInterrupt]:
    return [parse_interrupt(item) for item in interrupts]


def build_resume(pending: PendingInterrupt, decisions: Sequence[ResumeDecision]) -> Command:
    """Validate every decision against the interrupt, then build the resume command."""
    if len(decisions) != len(pending.actions):
        raise InvalidDecisions(
            f"{len(decisions)} decisions for {len(pending.actions)} actions"
            f" in {pending.interrupt_id}"
        )
    wire = [_decision_wire(a, d) for a, d in zip(pending.actions, decisions, strict=True)]
    if pending.kind == "tool_approval":
        return Command(resume={pending.interrupt_id: wire[0]})
    if pending.kind == "review":
        return Command(resume={pending.interrupt_id: _review_answer(wire[0])})
    return Command(resume={pending.interrupt_id: {"decisions": wire}})


def _review_answer(wire: dict[str, Any]) -> dict[str, Any]:
    if wire["type"] == "edit":
        return {"type": "edit", "args": wire["edited_action"]["args"]}
    return wire


def _decision_wire(action: ActionSpec, decision: ResumeDecision) -> dict[str, Any]:
    if decision.type not in action.allowed_decisions:
        raise InvalidDecisions(f"{decision.type!r} is not allowed for {action.name!r}")
    if decision.type == "approve":
        return {"type": "approve"}
    if decision.type == "edit":
        if not isinstance(decision.edited_args, dict):
            raise InvalidDecisions(f"edit of {action.name!r} carries no arguments")
        return {
            "type": "edit",
            "edited_action": {"name": action.name, "args": decision.edited_args},
        }
    if decision.type == "respond" and not decision.message:
        raise InvalidDecisions(f"respond to {action.name!r} needs a message")
    wire: dict[str, Any] = {"type": decision.type}
    if decision.message:
        wire["message"] = decision.message
    return wire


def last_turn_call_ids(messages: Sequence[Any]) -> list[str]:
    """The ids of every call of the last model turn, reviewed or not."""
    return [str(c["id"]) for c in _last_turn_calls(messages) if c.get("id")]


def _last_turn_calls(messages: Sequence[Any]) -> list[dict[str, Any]]:
    for message in reversed(messages):
        if calls := list(getattr(message, "tool_calls", None) or []):
            return calls
    return []


def tool_call_ids(messages: Sequence[Any], pending: PendingInterrupt) -> list[str | None]:
    """Trace ids of a batch: match each action to the last model turn's calls, in order."""
    if pending.kind == "tool_approval":
        return [a.tool_call_id for a in pending.actions]
    calls = _last_turn_calls(messages)
    ids: list[str | None] = []
    for action in pending.actions:
        args = canonical_json(action.args)  # the call as the model made it, tuples or lists
        found = next(
            (c for c in calls if c["name"] == action.name and canonical_json(c["args"]) == args),
            None,
        )
        if found is not None:
            calls.remove(found)
        ids.append(found.get("id") if found else None)
    return ids


def final_text(values: Mapping[str, Any]) -> str:
    """The run's answer: the last AI message's text."""
    for message in reversed(values.get(MESSAGES, [])):
        if getattr(message, "type", None) == "ai":
            text = getattr(message, "text", None)
            content = text if isinstance(text, str) else message.content
            if content:
                return str(content)
    return "The run finished without a reply."


def tool_results(
    messages: Sequence[Any],
    call_ids: Sequence[str | None],
    *,
    kept: Callable[[str | None], str | None],
) -> dict[str, dict[str, str]]:
    """What each reviewed tool call returned: status and a short preview, for the audit log.
    ``call_ids`` as the store keeps them: ``kept`` makes a message's id one of those."""
    wanted = {c for c in call_ids if c}
    found: dict[str, dict[str, str]] = {}
    for message in messages:
        call_id = kept(getattr(message, "tool_call_id", None))
        if getattr(message, "type", None) == "tool" and call_id in wanted:
            found[call_id] = {
                "status": str(getattr(message, "status", "success")),
                "preview": str(message.content)[:500],
            }
    return found


def subagent_of(messages: Sequence[Any], pending: PendingInterrupt) -> str | None:
    """Which subagent raised an interrupt, where it can be known: the parent's pending ``task``
    call, when none of the parent's own calls is the one under review."""
    calls: list[dict[str, Any]] = []
    for message in reversed(messages):
        calls = list(getattr(message, "tool_calls", None) or [])
        if calls:
            break
    tasks = [c for c in calls if c.get("name") == "task"]
    own = {(c.get("name"), canonical_json(c.get("args"))) for c in calls}
    reviewed = {(a.name, canonical_json(a.args)) for a in pending.actions}
    if len(tasks) != 1 or reviewed & own:
        return None
    name = tasks[0].get("args", {}).get("subagent_type")
    return str(name) if name else None
