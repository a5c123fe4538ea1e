"""A gated call refused: audited (without the values the policy redacts), its run's thread
told unless the call is a duplicate of one running, and the agent told why in the text it
reads."""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from langchain_core.tools import ToolException

from agent_runtime.notifier import Notifier
from agent_runtime.policy import Policy
from agent_runtime.views import RunView, run_view
from agent_runtime.wire import action_hash
from store.db import Database
from store.repositories import AuditRepository, RunRepository

logger = logging.getLogger(__name__)
BLOCKED_EVENT = "ungated_call_blocked"


class GateRefused(ToolException):
    """A gated call without a matching approval: nothing ran for it (a duplicate of a call
    still running is refused too, without denying that call's effect). The agent reads this
    text."""


def refuse(
    db: Database,
    *,
    notifier: Notifier,
    policy: Policy,
    call: tuple[str | None, str, dict[str, Any]],
    reason: str,
) -> NoReturn:
    """Audit, tell the run's thread, and make the agent read why nothing ran. ``call``: its
    run (thread) id, if any, tool name and arguments."""
    run_id, tool_name, _args = call
    view = _audit(db, policy=policy, call=call, reason=reason)
    if view is not None:
        try:
            notifier.call_blocked(view, tool_name=tool_name, reason=reason)
        except Exception:
            logger.exception("could not tell the thread of %s about a blocked call", run_id)
    raise GateRefused(
        f"Refused: {tool_name} did not run because {reason}. Gated actions run only after "
        "people approve exactly that call in Slack; do not try to get around the review."
    )


def refuse_duplicate(
    db: Database, *, policy: Policy, call: tuple[str | None, str, dict[str, Any]]
) -> NoReturn:
    """This very call runs already (started twice at once): audited, but nothing was
    blocked that people need to hear of, and the agent is not told the effect did not
    happen (the first run may be doing it now)."""
    reason = "this very call is already running (it was started twice at once)"
    _audit(db, policy=policy, call=call, reason=reason)
    raise GateRefused(
        f"Not run again: this very {call[1]} call is already running (it was started "
        "twice at once); its own run reports what it did."
    )


def _audit(
    db: Database, *, policy: Policy, call: tuple[str | None, str, dict[str, Any]], reason: str
) -> RunView | None:
    """The audit and the log keep the reason without the values the policy redacts (a
    constraint's refusal quotes the value it refused); the run, to tell its thread."""
    run_id, tool_name, args = call
    digest = action_hash(tool_name, args, policy.version)
    kept = policy.rule_for(tool_name).redacted_text(reason, args)
    with db.transaction() as s:
        run = RunRepository(s).get(run_id) if run_id else None
        AuditRepository(s).record(
            BLOCKED_EVENT,
            outcome="refused",
            run_id=run.id if run else None,
            team_id=run.team_id if run else None,
            reason=kept,
            detail={"tool": tool_name, "action_hash": digest, "thread_id": run_id},
        )
        view = run_view(run) if run is not None else None
    logger.warning("blocked %s in %s: %s", tool_name, run_id, kept)
    return view
