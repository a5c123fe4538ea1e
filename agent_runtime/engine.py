"""The approval engine: runs, interrupts, authorized decisions and the exactly-once resume."""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.types import StateSnapshot

from agent_runtime import cards, decisions, listing, resume
from agent_runtime.authorization import Actor, Refusal
from agent_runtime.errors import NotPermitted, UnsupportedInterrupt
from agent_runtime.faults import fault_point
from agent_runtime.graph_runtime import GraphRuntime
from agent_runtime.notifier import MessageRef, Notifier
from agent_runtime.policy import Policy
from agent_runtime.recording import POLICY_VETO, build_request
from agent_runtime.views import ApprovalView, RunView, approval_view, run_view
from agent_runtime.wire import final_text, pending_interrupts, subagent_of, tool_call_ids
from store.db import Database
from store.locks import ThreadLocks
from store.models import Run, new_id, utcnow
from store.repositories import ApprovalRepository, AuditRepository, RunRepository

logger = logging.getLogger(__name__)


DecisionResult = decisions.DecisionResult


def _no_groups(_group: str) -> frozenset[str]:
    return frozenset()


class ApprovalEngine:
    def __init__(
        self,
        *,
        db: Database,
        runtime: GraphRuntime,
        policy: Policy,
        notifier: Notifier,
        usergroup_members: Callable[[str], frozenset[str]] = _no_groups,
        clock: Callable[[], dt.datetime] = utcnow,
        lease: dt.timedelta = dt.timedelta(minutes=10),
        card_retry_after: dt.timedelta = dt.timedelta(seconds=10),
    ) -> None:
        """``card_retry_after``: how old a request without a card must be before the
        reconciler looks for its card or posts it again."""
        self.db = db
        self.runtime = runtime
        self.policy = policy
        self.notifier = notifier
        self.usergroup_members = usergroup_members
        self.clock = clock
        self.lease = lease
        self.card_retry_after = card_retry_after
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.locks = ThreadLocks(db)

    # Runs ---------------------------------------------------------------------------------

    def start_run(self, *, actor: Actor, channel_id: str, text: str) -> RunView:
        """Record a run (fast). ``execute_run`` does the slow part."""
        if not self.policy.may_request(actor.user_id, usergroup_members=self.usergroup_members):
            with self.db.transaction() as s:
                AuditRepository(s).record(
                    "run_refused",
                    outcome="refused",
                    actor_id=actor.user_id,
                    team_id=actor.team_id,
                    reason="not a requester",
                )
            raise NotPermitted(actor.user_id)
        now = self.clock()
        run = Run(
            id=new_id("run"),
            team_id=actor.team_id,
            enterprise_id=actor.enterprise_id,
            requester_id=actor.user_id,
            channel_id=channel_id,
            request_text=text,
            status="running",
            created_at=now,
            updated_at=now,
        )
        with self.db.transaction() as s:
            RunRepository(s).add(run)
            AuditRepository(s).record(
                "run_started",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=run.id,
                detail={"channel": channel_id, "text": text[:2000]},
            )
        return run_view(run)

    def set_thread(self, run_id: str, thread_ts: str) -> None:
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            if run is not None:
                run.thread_ts = thread_ts

    def execute_run(self, run_id: str) -> None:
        """Run the agent to its first interrupt or its end. Never starts the same thread twice."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
        if run is None:
            raise LookupError(run_id)
        with self.locks.hold(run_id):
            if self.runtime.has_checkpoint(run_id):
                logger.warning("run %s already has a checkpoint; not starting it again", run_id)
                return
            try:
                self.runtime.invoke({"messages": [HumanMessage(run.request_text)]}, run_id)
            except Exception as exc:
                logger.exception("run %s failed", run_id)
                self.fail_run(run_id, f"The agent failed: {type(exc).__name__}: {exc}")
                return
            self.advance(run_id)

    def advance(self, run_id: str, state: StateSnapshot | None = None) -> None:
        """After the graph stopped: record its new interrupts, or its result."""
        state = state if state is not None else self.runtime.state(run_id)
        if not state.interrupts:
            self._complete_run(run_id, final_text(state.values))
            return
        try:
            pendings = pending_interrupts(state.interrupts)
        except UnsupportedInterrupt as exc:
            self.fail_run(run_id, f"The agent paused on something I cannot review: {exc}")
            return
        messages = state.values.get("messages", [])
        for pending in pendings:
            with self.db.transaction() as s:
                repo = ApprovalRepository(s)
                run = RunRepository(s).get(run_id)
                if run is None or repo.by_interrupt(run_id, pending.interrupt_id):
                    continue
                request, actions = build_request(
                    run,
                    pending,
                    policy=self.policy,
                    catalog=self.runtime.catalog,
                    now=self.clock(),
                    tool_call_ids=tool_call_ids(messages, pending),
                    taken_operations=repo.operation_ids(run_id),
                    subagent=subagent_of(messages, pending),
                )
                repo.add(request, actions)
                RunRepository(s).set_status(run, "waiting")
                AuditRepository(s).record(
                    "interrupt_recorded",
                    run_id=run_id,
                    request_id=request.id,
                    team_id=run.team_id,
                    detail={
                        "interrupt_id": pending.interrupt_id,
                        "actions": [
                            {
                                "tool": a.tool_name,
                                "hash": a.action_hash,
                                "exempt": a.exempt,
                                "policy_violation": (a.extra or {}).get(POLICY_VETO),
                            }
                            for a in actions
                        ],
                    },
                )
                request_id = request.id
                # Exempt by ``when`` or refused by a constraint: nothing for people to decide.
                all_decided = all(a.outcome for a in actions)
                if all_decided:
                    repo.claim(request.id, owner=self.owner, lease=self.lease)
            if all_decided:
                resume.resume_locked(self, request_id, final_status="resolved")
            else:
                self.post_card(request_id)

    def post_card(self, request_id: str, *, look_first: bool = False) -> None:
        """Post a pending request's card if it has none (``cards.post``); under the run's lock."""
        cards.post(self, request_id, look_first=look_first)

    def _complete_run(self, run_id: str, text: str) -> None:
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            assert run is not None
            RunRepository(s).set_status(run, "completed", result_text=text)
            AuditRepository(s).record("run_completed", run_id=run_id, team_id=run.team_id)
            view = run_view(run)
        self.post_result(view)

    def post_result(self, run: RunView) -> None:
        """Tell the thread, then remember it was told (a crash in between tells it twice)."""
        fault_point("before_result")
        try:
            self.notifier.run_finished(run)
        except Exception:
            logger.exception("could not post the result of %s; the reconciler will retry", run.id)
            return
        with self.db.transaction() as s:
            stored = RunRepository(s).get(run.id)
            if stored is not None:
                stored.result_posted = True

    def show_card(self, view: ApprovalView) -> None:
        """Re-render the card (``cards.show``)."""
        cards.show(self, view)

    @contextmanager
    def lease_keeper(self, request_id: str) -> Iterator[None]:
        """Renew this process's claim while it resumes, so a slow resume is not taken over."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.lease.total_seconds() / 3):
                with self.db.transaction() as s:
                    ApprovalRepository(s).renew_claim(
                        request_id, owner=self.owner, until=self.clock() + self.lease
                    )

        keeper = threading.Thread(target=renew, name=f"lease-{request_id}", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()
            keeper.join(timeout=5)

    def fail_run(self, run_id: str, reason: str) -> None:
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            assert run is not None
            RunRepository(s).set_status(run, "failed", result_text=reason)
            AuditRepository(s).record(
                "run_failed", outcome="error", run_id=run_id, team_id=run.team_id, reason=reason
            )
            view = run_view(run)
        self.post_result(view)

    # Reading ------------------------------------------------------------------------------

    def approval(self, request_id: str) -> ApprovalView | None:
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            return approval_view(request) if request else None

    def pending_for(self, actor: Actor, *, limit: int = 50) -> list[ApprovalView]:
        """The approvals waiting on this reviewer (see ``listing``)."""
        return listing.pending_for(self, actor, limit=limit)

    def approval_of_action(self, action_id: str) -> ApprovalView | None:
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            request = ApprovalRepository(s).get(action.request_id) if action else None
            return approval_view(request) if request else None

    # Decisions ----------------------------------------------------------------------------

    def check(
        self, *, action_id: str, actor: Actor, decision: str, seen_hash: str | None
    ) -> Refusal | None:
        return decisions.check(
            self, action_id=action_id, actor=actor, decision=decision, seen_hash=seen_hash
        )

    def record_refusal(
        self,
        *,
        request_id: str,
        actor: Actor,
        refusal: Refusal,
        decision: str,
        via: dict[str, str] | None = None,
    ) -> None:
        """Audit an attempt refused before it reached one action (e.g. a stale Approve all)."""
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            AuditRepository(s).record(
                "decision_refused",
                outcome="refused",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=request.run_id if request else None,
                request_id=request_id if request else None,
                reason=refusal.value,
                detail={"decision": decision, **(via or {})},
            )

    def record_dropped(
        self,
        *,
        actor: Actor,
        what: str,
        action_id: str | None = None,
        request_id: str | None = None,
    ) -> None:
        """Audit a click, submission or command refused because the bot was too busy (its user
        was told to try again). The action or request it named is kept when it exists."""
        with self.db.transaction() as s:
            repo = ApprovalRepository(s)
            action = repo.get_action(action_id) if action_id else None
            wanted = action.request_id if action else request_id
            request = repo.get(wanted) if wanted else None
            AuditRepository(s).record(
                "request_dropped",
                outcome="refused",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=request.run_id if request else None,
                request_id=request.id if request else None,
                action_id=action.id if action else None,
                reason="busy",
                detail={"dropped": what},
            )

    def edit_form(self, action_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The JSON schema an edit must satisfy and the arguments it starts from."""
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            if action is None:
                return None
            current = dict(action.edited_args if action.edited_args is not None else action.args)
        return self.runtime.catalog.schema(action.tool_name, current).json_schema(), current

    def edit_errors(self, action_id: str, edited: dict[str, Any]) -> dict[str, str]:
        """Errors by argument for an edit (schema, then policy constraints); empty if valid."""
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            if action is None:
                return {}
            return decisions.edit_errors(self, action, edited)

    def decide(
        self,
        *,
        action_id: str,
        actor: Actor,
        decision: str,
        seen_hash: str | None,
        message: str | None = None,
        edited_args: dict[str, Any] | None = None,
        card: MessageRef | None = None,
        via: dict[str, str] | None = None,
        attempt_key: str | None = None,
    ) -> DecisionResult:
        """Record a decision on the version the reviewer saw, update the card, and resume if
        this completed the request. ``card``: the message clicked, if the click came from one;
        ``via``: the one attempt this decision is part of (kept in its audit row);
        ``attempt_key``: an idempotency key: a redo with it returns the recorded decision."""
        attempt = decisions.Attempt(
            actor=actor,
            decision=decision,
            seen_hash=seen_hash,
            message=message,
            edited_args=edited_args,
            card=card,
            via=via,
            attempt_key=attempt_key,
        )
        result = decisions.record(self, action_id=action_id, attempt=attempt)
        if result.refusal is Refusal.POLICY_CHANGED and result.current is not None:
            resume.invalidate(
                self,
                result.current.id,
                reason=(
                    f"the approval policy changed from {result.current.policy_version} to "
                    f"{self.policy.version} since the card was posted; ask again to review "
                    "it under the current policy"
                ),
            )
        if result.refusal is Refusal.STALE_VERSION and result.current is not None:
            self.show_card(result.current)  # e.g. a card drawn before versions were on buttons
        if result.approval is not None:
            fault_point("after_decision")
            self.show_card(result.approval)
            if result.approval.status == "resuming":
                resume.resume(self, result.approval.id)
        return result
