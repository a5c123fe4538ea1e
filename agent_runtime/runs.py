"""A run's life: recorded when asked for, executed to its first interrupt, then at every stop
either new approvals recorded (and their cards posted) or its result recorded and posted.

Callers hold the run's thread lock around ``execute`` and ``record_stop``: one process at a time
moves a thread. Nothing here resumes anything; ``record_stop`` returns what must be resumed."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator

from langchain_core.messages import HumanMessage

from agent_runtime.announcer import Announcer
from agent_runtime.authorization import Actor
from agent_runtime.errors import NotPermitted, UnsupportedInterrupt
from agent_runtime.interrupt_recorder import InterruptRecorder
from agent_runtime.policy import Policy
from agent_runtime.run_end import Told, record_run_end
from agent_runtime.runtime import AgentRuntime, ThreadStop
from agent_runtime.views import RunView, run_view
from agent_runtime.wire import (
    MESSAGES,
    final_text,
    pending_interrupts,
)
from store.clean import clean_text
from store.db import Database, refused_for_content
from store.models import Run, new_id
from store.repositories import AuditRepository, RunRepository
from store.statuses import RunStatus

logger = logging.getLogger(__name__)


STOPPED_MIDWAY = (
    "The agent stopped before it paused or finished, and nothing says why (the bot may have "
    "restarted while it worked). Start the request again."
)
START_FAILED = "The agent did not start: the run's thread could not be posted or recorded."
NEVER_STARTED = (
    "The agent did not start (the bot stopped, or its start failed, before it began). "
    "Start the request again."
)


class RunLifecycle:
    def __init__(
        self,
        *,
        db: Database,
        runtime: AgentRuntime,
        policy: Policy,
        interrupts: InterruptRecorder,
        announcer: Announcer,
        clock: Callable[[], dt.datetime],
        usergroup_members: Callable[[str], frozenset[str]],
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.policy = policy
        self.interrupts = interrupts
        self.announcer = announcer
        self.clock = clock
        self.usergroup_members = usergroup_members

    def start(
        self, *, actor: Actor, channel_id: str, text: str, run_id: str | None = None
    ) -> RunView:
        """Record a run (fast); ``execute`` does the slow part. Refusals are audited.
        ``run_id``: the id to record it under (its lock may be held before it exists)."""
        policy = self.policy.for_team(actor.team_id)
        if not policy.may_request(actor.user_id, usergroup_members=self.usergroup_members):
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
            id=run_id or new_id("run"),
            team_id=actor.team_id,
            enterprise_id=actor.enterprise_id,
            requester_id=actor.user_id,
            channel_id=channel_id,
            request_text=clean_text(text),  # what is shown is what is kept
            status=RunStatus.RUNNING,
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
        """Its start is under way from now (its agent starts next): maintenance leaves it
        a lease from now, however long the thread's post took."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            if run is not None:
                run.thread_ts, run.updated_at = thread_ts, self.clock()

    def execute(self, run_id: str) -> ThreadStop | None:
        """Run the agent to its first interrupt or its end; the state it stopped in, or
        ``None`` when there is nothing more to do (already started, or failed and told)."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
        if run is None:
            raise LookupError(run_id)
        if run.status != RunStatus.RUNNING:  # cancelled, or ended by maintenance meanwhile
            logger.info("run %s is %s before it started; not starting it", run_id, run.status)
            return None
        if self.runtime.has_checkpoint(run_id):
            logger.warning("run %s already has a checkpoint; not starting it again", run_id)
            return None
        try:
            stop = self.runtime.invoke({MESSAGES: [HumanMessage(run.request_text)]}, run_id)
        except Exception as exc:
            logger.exception("run %s failed", run_id)
            self.fail(run_id, f"The agent failed: {type(exc).__name__}: {exc}")
            return None
        if stop is not None:
            return stop
        try:
            return self.runtime.state(run_id)
        except Exception:  # it ran: its stop is recorded once it can be read
            logger.exception("could not read where run %s stopped; read again later", run_id)
            self._leave_to_maintenance(run_id)
            return None

    def _read_or_end(self, run_id: str) -> ThreadStop | None:
        """Where the run's thread stopped. A run left running that never started (its
        process died first, or its start failed and the requester was told so) or that
        stopped mid-way (its process died while the agent worked, or its failure was never
        recorded) fails, told in its thread (``end_stalled``): nothing is run that no one
        asked for since."""
        state = self.runtime.state(run_id)  # no checkpoint: no ``created_at``
        if self._status(run_id) != RunStatus.RUNNING:
            return state
        if state.created_at is None:
            self.end_stalled(run_id, NEVER_STARTED)
        elif state.next and not state.interrupts:
            self.fail(run_id, STOPPED_MIDWAY)
        else:
            return state
        return None

    def _leave_to_maintenance(self, run_id: str) -> None:
        """A started run whose stop was not recorded: waiting with nothing open, which
        maintenance reads again once the run settled (``stalled_runs``), as after a crash."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id, for_update=True)
            if run is not None and run.status == RunStatus.RUNNING:
                RunRepository(s).set_status(run, RunStatus.WAITING)

    def record_stop(self, run_id: str, state: ThreadStop | None = None) -> Iterator[str]:
        """After the graph stopped: its result, or its new interrupts with their cards.

        Lazy, one interrupt at a time: a request nothing was left to decide on (exempt, or
        refused by policy) is claimed and yielded for the caller to resume before the next
        interrupt is recorded, so no claim waits unrenewed. Iterate it to the end."""
        # A cancelled run records nothing more, and nothing of it is resumed; its thread is
        # not even read. Given the state, a run that ended is checked by ``_finish``, or by
        # ``InterruptRecorder.record``, which records nothing for it.
        checked = state is None
        if checked and self._cancelled(run_id):
            return
        state = state if state is not None else self._read_or_end(run_id)
        if state is None:  # a run left running that could not be carried on: failed, told
            return
        if not state.interrupts:
            self._finish(run_id, RunStatus.COMPLETED, final_text(state.values))
            return
        if not checked and self._cancelled(run_id):
            return
        try:
            pendings = pending_interrupts(state.interrupts)
        except UnsupportedInterrupt as exc:
            self.fail(run_id, f"The agent paused on something I cannot review: {exc}")
            return
        for pending in pendings:
            try:
                recorded = self.interrupts.record(run_id, pending, state=state)
            except Exception as exc:
                if not refused_for_content(exc):
                    raise  # the store in trouble: the run is carried on again later
                # Never recordable as it is: a run left "running" with no card would wait forever.
                logger.exception("the interrupt of %s cannot be stored", run_id)
                what = ", ".join(a.name for a in pending.actions)
                self.fail(run_id, f"The agent paused on something I cannot record ({what}).")
                return
            if recorded is None:
                continue
            if recorded.stopped is not None:
                self._tell(recorded.stopped)
                return
            if recorded.decided:
                yield recorded.request_id
            else:
                self.announcer.post_card(recorded.request_id)

    def _cancelled(self, run_id: str) -> bool:
        return self._status(run_id) == RunStatus.CANCELLED

    def _status(self, run_id: str) -> str | None:
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
            return run.status if run is not None else None

    def fail(self, run_id: str, reason: str) -> None:
        self._finish(run_id, RunStatus.FAILED, reason)

    def end_stalled(self, run_id: str, reason: str) -> None:
        """End a run maintenance cannot carry on: failed, told in its thread; with no
        thread, nobody saw it start, and nothing is posted (``abandon``)."""
        with self.db.transaction() as s:
            run = RunRepository(s).get(run_id)
        if run is not None and run.thread_ts is None:
            self.abandon(run_id, reason)
        else:
            self.fail(run_id, reason)

    def abandon(self, run_id: str, reason: str) -> None:
        """End a run that has no thread, with nothing to post: its requester was told by
        whoever tried to start it, or saw nothing start (its process died first; a message
        in the channel, long after, would tell nobody anything)."""
        with self.db.transaction() as s:
            ended = record_run_end(
                s, run_id, status=RunStatus.FAILED, text=reason, policy=self.policy
            )
            if ended is not None:
                RunRepository(s).mark_result_posted(run_id)

    def _finish(self, run_id: str, status: RunStatus, text: str) -> None:
        """Record the run's end, unless it had already ended (its thread was told that), then
        draw the cards it closed and tell the thread."""
        with self.db.transaction() as s:
            told = record_run_end(s, run_id, status=status, text=text, policy=self.policy)
        if told is not None:
            self._tell(told)

    def _tell(self, told: Told) -> None:
        """The cards a run's end closed, then its thread."""
        self.announcer.show_cards(told.cards)
        self.announcer.run_finished(told.run)
