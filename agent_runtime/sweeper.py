"""Expiry and reminders, in the background. Restart-safe (all state is in the store) and safe
with several replicas (every step is a conditional update that exactly one process wins)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent_runtime.announcer import Announcer
from agent_runtime.claims import Claims
from agent_runtime.policy import REQUESTER_ROLE, Policy
from agent_runtime.resume_records import EXPIRED_MESSAGE
from agent_runtime.views import ApprovalView, Reviewers, approval_view
from store.db import Database
from store.maintenance import MaintenanceQueries
from store.repositories import ApprovalRepository, AuditRepository
from store.statuses import ActionOutcome, RequestStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepResult:
    expired: int
    reminded: int
    digests: int = 0
    """Digest messages posted."""


class Sweeper:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        claims: Claims,
        announcer: Announcer,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self.db = db
        self.policy = policy
        self.claims = claims
        self.announcer = announcer
        self.clock = clock

    def expire_due(self) -> Iterator[str]:
        """Fail closed: every action that needed a person is rejected with "approval
        expired". Yields each request as soon as this process claimed it, for the caller to
        resume before the next is claimed: a claim never waits unrenewed behind others."""
        now = self.clock()
        with self.db.transaction() as s:
            due = MaintenanceQueries(s).due_for_expiry(now)
        for request_id in due:
            with self.db.transaction() as s:
                repo = ApprovalRepository(s)
                request = repo.get(request_id, for_update=True)
                if (
                    request is None
                    or request.status != RequestStatus.PENDING
                    or request.expires_at > now
                ):
                    continue
                for action in request.actions:
                    if not action.exempt:
                        action.outcome = ActionOutcome.EXPIRED
                if not self.claims.claim(s, request_id):
                    continue
                request.status = RequestStatus.RESUMING
                AuditRepository(s).record(
                    "expired",
                    outcome="info",
                    run_id=request.run_id,
                    request_id=request_id,
                    team_id=request.team_id,
                    reason=EXPIRED_MESSAGE,
                )
                view = approval_view(request)
            self.announcer.expired(view)
            yield request_id

    def remind_due(self) -> int:
        now = self.clock()
        done = 0
        with self.db.transaction() as s:
            due = MaintenanceQueries(s).due_for_reminder(now)
        for request_id in due:
            with self.db.transaction() as s:
                won = ApprovalRepository(s).mark_reminded(request_id, now=now)
                if not won:
                    continue
                request = ApprovalRepository(s).get(request_id)
                assert request is not None
                AuditRepository(s).record(
                    "reminder_sent",
                    run_id=request.run_id,
                    request_id=request_id,
                    team_id=request.team_id,
                )
                view = approval_view(request)
            self.announcer.remind(
                view, self.reviewers(view), self.policy.defaults.escalation_channel
            )
            done += 1
        return done

    def reviewers(self, view: ApprovalView) -> Reviewers:
        """Eligible reviewers of the undecided actions: never the requester, nor who approved."""
        users: dict[str, None] = {}
        groups: dict[str, None] = {}
        policy = self.policy.for_team(view.run.team_id)
        for action in view.actions:
            if action.outcome is not None:
                continue
            for role in action.approver_roles:
                if role == REQUESTER_ROLE:
                    users[view.requester_id] = None
                    continue
                spec = policy.roles.get(role)
                if spec is None:
                    continue
                skip = {view.requester_id, *action.approvers}
                users.update(dict.fromkeys(u for u in spec.users if u not in skip))
                groups.update(dict.fromkeys(spec.usergroups))
        return Reviewers(users=tuple(users), usergroups=tuple(groups))


class Maintenance:
    """One background thread for the sweeper and the reconciler, every ``interval`` seconds."""

    def __init__(self, tasks: list[Callable[[], object]], *, interval: float = 30.0) -> None:
        self.tasks = tasks
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            for task in self.tasks:
                try:
                    task()
                except Exception:
                    logger.exception("background task failed; trying again in %.0fs", self.interval)
