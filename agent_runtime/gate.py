"""The point-of-effect gate: a gated tool runs only if the store holds an approval for exactly
this call (run, tool, normalized arguments, policy version), whatever wired the agent.

The approval card is how a call usually reaches people; this gate is what the guarantee rests
on. Each approved action is spent by one tool call; the same call repeated after a crash gets
the stored result back instead of repeating its effect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from sqlalchemy.orm import Session

from agent_runtime.call_identity import call_id_of, thread_of
from agent_runtime.catalog import ArgsState, ToolCatalog
from agent_runtime.constraints import violations
from agent_runtime.faults import fault_point
from agent_runtime.gate_refusals import BLOCKED_EVENT, GateRefused, refuse, refuse_duplicate
from agent_runtime.grants import Grant, bound_hash_of, idempotency_key, why_not
from agent_runtime.in_flight import InFlight
from agent_runtime.kill_switch import paused_reason
from agent_runtime.notifier import Notifier
from agent_runtime.policy import Policy
from agent_runtime.recording import version_drift
from agent_runtime.schemas import InvalidArguments, ToolSchema
from store.call_looks import CallLooks, GatedAction, Spend
from store.db import Database
from store.executions import ExecutionRepository
from store.statuses import FINISHED_RUN, RequestStatus, RunStatus

logger = logging.getLogger(__name__)
__all__ = ["BLOCKED_EVENT", "EffectGate", "GateRefused", "Grant"]
"""``GateRefused`` and ``BLOCKED_EVENT`` live in ``gate_refusals``, ``Grant`` in ``grants``;
tools import them here."""


class EffectGate:
    def __init__(
        self, *, db: Database, policy: Policy, catalog: ToolCatalog, notifier: Notifier
    ) -> None:
        self.db = db
        self.policy = policy
        self.catalog = catalog
        self.notifier = notifier
        self.in_flight = InFlight()

    def run(
        self,
        config: Mapping[str, Any] | None,
        *,
        tool_name: str,
        args: Mapping[str, Any],
        effect: Callable[[], str],
        tool_call_id: str | None = None,
    ) -> str:
        """Run ``effect`` if this call is approved (or the policy does not gate it)."""
        grant = self.authorize(config, tool_name=tool_name, args=args, tool_call_id=tool_call_id)
        if grant is None:
            return effect()
        if grant.stored_result is not None:
            return grant.stored_result
        try:
            fault_point("inside_tool")
            with self.running(grant):
                result = effect()
        except Exception as exc:
            # The approval is spent either way; a replay of this call must not try again.
            self.finish(grant, f"Failed: {type(exc).__name__}: {exc}")
            raise
        except BaseException:
            self.abandon(grant)
            raise
        self.finish(grant, result)
        fault_point("after_tool")
        return result

    def authorize(
        self,
        config: Mapping[str, Any] | None,
        *,
        tool_name: str,
        args: Mapping[str, Any],
        tool_call_id: str | None = None,
        schema: ToolSchema | None = None,
    ) -> Grant | None:
        """None when the policy does not gate these arguments; a grant that spends one
        approved action; or ``GateRefused`` (audited, and told in the thread unless the call
        is a duplicate of one running). ``schema``: the
        calling tool's own, when it knows it (two tools may share a name)."""
        rule = self.policy.rule_for(tool_name)
        normalized, state = self._normalize(tool_name, args, schema)
        run_id = thread_of(config)
        broken = violations(rule.constraints, normalized)
        if broken:  # constraints hold whether or not the call needs a review
            reason = "the policy does not allow these arguments: " + " ".join(broken.values())
            return self._refuse(run_id, tool_name, normalized, reason)
        if not rule.gated or (state is ArgsState.VALID and not rule.applies_to(normalized)):
            return None
        return self._grant(run_id, tool_name, normalized, call_id_of(config, tool_call_id))

    def _normalize(
        self, tool_name: str, args: Mapping[str, Any], schema: ToolSchema | None
    ) -> tuple[dict[str, Any], ArgsState]:
        if schema is None:
            return self.catalog.normalize_or_raw(tool_name, args)
        try:
            return schema.normalize(args), ArgsState.VALID
        except InvalidArguments:
            return dict(args), ArgsState.INVALID

    def _drift(self, action: GatedAction) -> str | None:
        """What changed since ``action`` was reviewed (the environment, the tool's version or
        argument schema here, at the effect), as the resume checks it: a process that took
        over a resume, or a server redeployed apart from the bot, may run another version."""
        return version_drift(
            action.request, environment=self.policy.environment, versions=self.catalog.versions
        )

    def abandon(self, grant: Grant) -> None:
        """A call given up inside its effect, with no result (interrupted, cancelled): left
        cut short in the store, as a crash leaves it, for a replay to run again."""
        self.in_flight.release(grant.action_id, grant.hold)

    def running(self, grant: Grant) -> AbstractContextManager[None]:
        """Around the effect: while it runs, however long, the same call arriving again in
        this process is refused as a duplicate, never taken for one cut short."""
        return self.in_flight.running(grant.hold)

    def finish(self, grant: Grant, result: str) -> None:
        """One conditional update: on PostgreSQL it runs on its own, with no transaction
        around it to begin and commit on the reviewer's wait."""
        with self.db.single() as s:
            ExecutionRepository(s).finish(grant.action_id, result=result)
        # Not kept, it would look cut short: held until it goes stale (``InFlight``).
        self.in_flight.release(grant.action_id, grant.hold)

    def _grant(
        self,
        run_id: str | None,
        tool_name: str,
        args: dict[str, Any],
        tool_call_id: str,
    ) -> Grant:
        if run_id is None:
            return self._refuse(run_id, tool_name, args, "it was called outside any run")
        call = (run_id, tool_name, args, tool_call_id)
        held: list[Grant] = []  # what this call took: let go if it never commits
        try:
            with self.db.transaction() as s:
                found = self._look(s, call, held)
        except BaseException:
            for taken in held:
                self.in_flight.release(taken.action_id, taken.hold)
            raise
        if found.grant is not None:
            return found.grant
        if found.duplicate:
            return self._refuse_duplicate(run_id, tool_name, args)
        return self._refuse(run_id, tool_name, args, found.reason)

    def _look(self, s: Session, call: _Call, held: list[Grant]) -> _Found:
        """Inside the grant's transaction: a replay, a spend, or why neither."""
        run_id, tool_name, args, tool_call_id = call
        # Shared lock on the run's row: a cancel (or an end) commits before this check or
        # waits for this grant. An ended run's thread was told it stopped: none of its
        # approvals is spent any more, whatever is still open; a call that ran before the
        # end still gets its result back (what ran is told, never denied). A cancelled
        # run's approvals are not even replayed.
        # The same for the kill switch: a pause commits before this check or after it.
        # (On PostgreSQL in the statement that reads the rest: ``CallLooks.first``.)
        look = CallLooks(s).first(run_id=run_id, tool_name=tool_name, tool_call_id=tool_call_id)
        cancelled = look.run_status == RunStatus.CANCELLED
        ended = look.run_status in FINISHED_RUN
        switch, found = look.switch, look.records
        blocked = ended or switch.paused
        replay = None if cancelled else self._replay(found.spent, call, blocked=blocked)
        if replay is not None:
            return self._replayed(s, replay, call, held)
        candidates = [] if blocked else found.spendable
        matching = [a for a in candidates if a.bound_hash == bound_hash_of(a, tool_name, args)]
        current = [a for a in matching if a.request.policy_version == self.policy.version]
        drifted = [d for d in map(self._drift, current) if d is not None]
        spent, duplicate = self._spend(s, call, current)
        if spent is not None and spent.stored_result is None:
            # Not committed yet: nobody else holds it.
            spent = replace(spent, hold=self.in_flight.take(spent.action_id))
            held.append(spent)
        if spent is not None:
            return _Found(grant=spent)
        if cancelled:
            reason = "its run was cancelled"
        elif ended:
            reason = "its run has already ended"
        elif switch.paused:
            reason = paused_reason(switch)
        elif drifted:
            reason = f"its approval no longer holds: {drifted[0]}"
        else:
            reason = why_not(candidates, matching, current=current)
        return _Found(duplicate=duplicate, reason=reason)

    def _replayed(self, s: Session, replay: Grant, call: _Call, held: list[Grant]) -> _Found:
        """A kept result as it is. A call cut short runs again only if this process is not
        running it now (``InFlight``); once this call holds it, its record is read again: the
        run that held it until then may have kept its result since the first look."""
        if replay.stored_result is not None:
            return _Found(grant=replay)
        hold = self.in_flight.take(replay.action_id)
        if hold is None:
            return _Found(duplicate=True)
        replay = replace(replay, hold=hold)
        held.append(replay)
        run_id, tool_name, _args, tool_call_id = call
        now = CallLooks(s).again(run=run_id, tool=tool_name, call=tool_call_id).spent
        kept = [done.result for action, done in now if action.id == replay.action_id]
        if not kept or kept[0] is None:
            return _Found(grant=replay)
        held[:] = [taken for taken in held if taken is not replay]
        self.in_flight.release(replay.action_id, hold)
        return _Found(grant=Grant(replay.action_id, replay.key, kept[0]))

    def _spend(
        self, s: Session, call: _Call, current: list[GatedAction]
    ) -> tuple[Grant | None, bool]:
        """Spend one of ``current`` (approved, resuming, same arguments and policy) for this
        call; and whether it is a duplicate. An approval reviewed as this very call is the
        only one it may spend: the same call run twice at once (a node run again) must not
        take an identical call's. If this very call spent that one meanwhile, its result if
        kept by then (a replay), or a duplicate: never a second run."""
        run_id, tool_name, _args, tool_call_id = call
        named = [a for a in current if tool_call_id and a.tool_call_id == tool_call_id]
        spends, lost = ExecutionRepository(s), False
        for action in (a for a in named or current if self._drift(a) is None):
            key = idempotency_key(action)
            if spends.start(action.id, tool=tool_name, key=key, tool_call_id=tool_call_id):
                return Grant(action.id, key, None), False
            lost = True
        if not named or not lost:  # none tried (all drifted): the refusal says why
            return None, False
        # Read again: a spend this insert lost to had committed before it returned.
        spent = CallLooks(s).again(run=run_id, tool=tool_name, call=tool_call_id).spent
        again = self._replay(spent, call, blocked=True)
        if again is not None:
            return again, False
        ids = {a.id for a in named}
        return None, any(action.id in ids for action, _ in spent)

    def _replay(
        self, spent: list[tuple[GatedAction, Spend]], call: _Call, *, blocked: bool
    ) -> Grant | None:
        """What this very call already spent (``spent``): its result (a replay), or, for a
        call cut short whose request is still being resumed, its spend again (unless
        ``blocked``)."""
        _run_id, tool_name, args, _tool_call_id = call
        for action, done in spent:
            if action.bound_hash != bound_hash_of(action, tool_name, args):
                continue
            if done.result is not None:
                return Grant(action.id, done.idempotency_key, done.result)  # a replay
            resuming = action.request.status == RequestStatus.RESUMING
            if resuming and not blocked and self._drift(action) is None:
                return Grant(action.id, done.idempotency_key, None)  # a replay cut short
        return None

    def _refuse(
        self, run_id: str | None, tool_name: str, args: dict[str, Any], reason: str
    ) -> NoReturn:
        call = (run_id, tool_name, args)
        refuse(self.db, notifier=self.notifier, policy=self.policy, call=call, reason=reason)

    def _refuse_duplicate(self, run_id: str, tool_name: str, args: dict[str, Any]) -> NoReturn:
        refuse_duplicate(self.db, policy=self.policy, call=(run_id, tool_name, args))


@dataclass(frozen=True)
class _Found:
    """What a call's look found: its grant, that it is a duplicate, or why it is refused."""

    grant: Grant | None = None
    duplicate: bool = False
    reason: str = ""


_Call = tuple[str, str, dict[str, Any], str]
"""A gated call: its run (thread) id, tool name, arguments and tool-call id."""
