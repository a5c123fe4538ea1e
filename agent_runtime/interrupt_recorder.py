"""One interrupt of a run's thread recorded as its approval request, once, with its audit
event: the actions as reviewers will see them (normalized, each under the policy's rule), and
nothing to decide when every action was exempt or refused by the policy (then claimed, for
the caller to resume at once). A run whose agent keeps proposing calls the policy refuses is
stopped here instead. The caller holds the run's thread lock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from agent_runtime.action_roles import ActionRoles
from agent_runtime.call_identity import kept_call_id
from agent_runtime.catalog import ToolCatalog
from agent_runtime.claims import Claims
from agent_runtime.policy import Policy
from agent_runtime.recording import audited_actions, build_request
from agent_runtime.run_end import Told, fail_at_stop, refused_too_often
from agent_runtime.runtime import ThreadStop
from agent_runtime.wire import (
    MESSAGES,
    PendingInterrupt,
    last_turn_call_ids,
    subagent_of,
    tool_call_ids,
)
from store.db import Database
from store.repositories import ApprovalRepository, AuditRepository, RunRepository
from store.run_history import RunHistory
from store.statuses import FINISHED_RUN, RunStatus


@dataclass(frozen=True)
class Recorded:
    request_id: str
    decided: bool
    """Nothing left for people to decide, and claimed by this process: resume it now."""
    stopped: Told | None = None
    """The run stopped instead (too many calls refused by the policy): tell its thread."""


class InterruptRecorder:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        catalog: ToolCatalog,
        claims: Claims,
        clock: Callable[[], dt.datetime],
        roles: ActionRoles,
    ) -> None:
        """``roles``: where the approver roles of each action recorded are remembered, for
        the decisions on it."""
        self.db = db
        self.policy = policy
        self.catalog = catalog
        self.claims = claims
        self.clock = clock
        self.roles = roles

    def record(
        self, run_id: str, pending: PendingInterrupt, *, state: ThreadStop
    ) -> Recorded | None:
        """The request of one interrupt (once), and whether it is decided and claimed (or
        the run was stopped instead)."""
        messages = state.values.get(MESSAGES, [])
        with self.db.transaction() as s:
            repo = ApprovalRepository(s)
            # Locked, though every end of a run holds the thread lock too: a stop must never
            # reopen an ended run.
            run = RunRepository(s).get(run_id, for_update=True)
            if run is None or run.status in FINISHED_RUN:  # ended: nothing more of it is open
                return None
            if repo.by_interrupt(run_id, pending.interrupt_id):
                return None
            request, actions = build_request(
                run,
                pending,
                policy=self.policy,
                catalog=self.catalog,
                now=self.clock(),
                tool_call_ids=[kept_call_id(c) for c in tool_call_ids(messages, pending)],
                taken_operations=RunHistory(s).operation_ids(run_id),
                subagent=subagent_of(messages, pending),
                rejected=RunHistory(s).rejected_by_reviewers(run_id),
                turn_call_ids=[k for c in last_turn_call_ids(messages) if (k := kept_call_id(c))],
            )
            repo.add(request, actions)
            for action in actions:
                self.roles.remember(action.id, action.approver_roles)
            RunRepository(s).set_status(run, RunStatus.WAITING)
            stopping = refused_too_often(  # before the audit chain
                s, request, actions, limit=self.policy.defaults.max_policy_refusals
            )
            AuditRepository(s).record(
                "interrupt_recorded",
                run_id=run_id,
                request_id=request.id,
                team_id=run.team_id,
                detail={
                    "interrupt_id": pending.interrupt_id,
                    "actions": audited_actions(actions, self.policy),
                },
            )
            if stopping is not None:
                reason = (
                    "Stopped: the agent kept proposing calls the approval policy refuses ("
                    f"{stopping.refused} times in a row). None of them ran."
                )
                stopped = fail_at_stop(
                    s, run, request, reason=reason, others=stopping.others, policy=self.policy
                )
                return Recorded(request.id, decided=False, stopped=stopped)
            # Exempt by ``when`` or refused by a constraint: nothing for people to decide.
            decided = all(a.outcome for a in actions) and self.claims.claim(s, request.id)
            return Recorded(request.id, decided=decided)
