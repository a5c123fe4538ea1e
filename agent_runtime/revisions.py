"""Revise after reject, bounded. A reviewer's reason reaches the agent with what it may do next:
propose one corrected call (reviewed again, on a card that shows what changed since the
rejected one), or stop. After ``max_revisions`` corrected calls of a tool in one run, the next
is refused by the policy without asking anyone: a disagreement cannot become a loop.

A call of a tool after a reviewer rejected that tool in the same run counts as its revision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_runtime.policy import Policy
from store.models import Action

REVISION = "revision"
"""``Action.extra`` key: which rejected call this one revises, and how."""


def revision_of(tool_name: str, rejected: Sequence[Action]) -> dict[str, Any] | None:
    """What a new call of ``tool_name`` revises: the latest rejected call of that tool in the
    run, its arguments and reason, and how many revisions (this one included) there are."""
    earlier = [a for a in rejected if a.tool_name == tool_name]
    if not earlier:
        return None
    last = earlier[-1]
    reason = last.decisions[-1].message if last.decisions else None
    return {
        "action_id": last.id,
        "args": dict(last.edited_args or last.args),
        "reason": (reason or "")[:1000],
        "number": len(earlier),
    }


def over_the_limit(revision: Mapping[str, Any] | None, limit: int) -> str | None:
    """The policy's refusal of one revision too many, or None."""
    if revision is None or int(revision["number"]) <= limit:
        return None
    return (
        f"it was rejected {revision['number']} times in this run and the policy allows "
        f"{limit} corrected call{'s' if limit != 1 else ''}; do not propose it again"
    )


REVISE_HINT = "If you can address the reviewer's reason"
"""Where the reason ends and the instruction starts (the middleware may put text before it)."""


def rejection_for_agent(*, tool_name: str, reason: str, revisions_left: int) -> str:
    """What the agent reads in place of the tool's result: the reason, and what it may do."""
    said = reason.strip() or "no reason given"
    if revisions_left <= 0:
        return (
            f"{said}. {tool_name} was rejected and may not be proposed again in this run; "
            "stop and report what happened."
        )
    left = f"{revisions_left} revision{'s' if revisions_left != 1 else ''} left"
    return (
        f"{said}. {REVISE_HINT}, propose one corrected {tool_name} call; it will be reviewed "
        f"again ({left}). Otherwise stop and report."
    )


def revisions_left(action: Action, policy: Policy) -> int:
    """How many more corrected calls of this action's tool the run may propose."""
    done = int(((action.extra or {}).get(REVISION) or {}).get("number", 0))
    return max(policy.max_revisions_for(action.tool_name) - done, 0)
