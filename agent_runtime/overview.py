"""One person's view of the bot: what waits on them, what they asked for, their runs and what
they decided; and who has opened the Home tab, so that only their Home is republished."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from agent_runtime.authorization import Actor
from agent_runtime.listing import Page, PendingList
from agent_runtime.policy import REQUESTER_ROLE, Policy
from agent_runtime.views import ApprovalView, Reviewers, RunView, approval_view, run_view
from store.db import Database
from store.overview import DecidedRow, HomeViewers, OverviewQueries

__all__ = ["DecidedRow", "Home", "Overview"]


@dataclass(frozen=True)
class Home:
    """What one user's Home tab shows; each list one longer than shown tells there is more."""

    waiting: Page
    requested: list[ApprovalView]
    runs: list[RunView]
    decided: list[DecidedRow]
    limit: int
    """How many rows each list read at most: a list this long may have more."""


VIEWERS_FRESH_SECONDS = 30.0
"""How long the list of Home tab viewers is reused before it is read again: a viewer who first
opened the tab through another replica is refreshed at most this much later."""
MAX_VIEWERS = 100_000


class Overview:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        pending: PendingList,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.policy = policy
        self.pending = pending
        self.clock = clock
        self._viewers: dict[str, Actor] = {}
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def waiting(self, actor: Actor, *, size: int, after: str | None = None) -> Page:
        """What ``actor`` may decide now, oldest first, a page at a time."""
        return self.pending.page(actor, size=size, after=after)

    def requested_by(self, actor: Actor, *, limit: int) -> list[ApprovalView]:
        """The actor's own requests still waiting on reviewers, oldest first."""
        with self.db.transaction() as s:
            found = OverviewQueries(s).requested_pending(actor.user_id, limit=limit)
            return [approval_view(r) for r in found]

    def home(self, actor: Actor, *, limit: int) -> Home:
        """Each list reads up to ``limit`` rows (the Home view shows fewer and counts on)."""
        waiting = self.pending.page(actor, size=limit)
        with self.db.transaction() as s:
            queries = OverviewQueries(s)
            runs = [run_view(r) for r in queries.runs_of(actor.user_id, limit=limit)]
            decided = queries.decided_by(actor.user_id, limit=limit)
        return Home(
            waiting=waiting,
            requested=self.requested_by(actor, limit=limit),
            runs=runs,
            decided=decided,
            limit=limit,
        )

    def remember_viewer(self, actor: Actor) -> None:
        with self.db.transaction() as s:
            HomeViewers(s).remember(
                actor.user_id, team_id=actor.team_id, enterprise_id=actor.enterprise_id
            )
        with self._lock:  # copy on write: readers keep the dict they were given
            self._viewers = {**self._viewers, actor.user_id: actor}

    def viewers_among(self, user_ids: Collection[str], *, limit: int) -> list[Actor]:
        viewers = self._known_viewers()
        return [viewers[u] for u in sorted(user_ids) if u in viewers][:limit]

    def other_viewers(self, user_ids: Collection[str]) -> bool:
        """Whether anyone but ``user_ids`` has opened the Home tab (if not, user groups need
        not be asked for their members)."""
        return bool(self._known_viewers().keys() - set(user_ids))

    def _known_viewers(self) -> dict[str, Actor]:
        """Who has opened the Home tab, read once per ``VIEWERS_FRESH_SECONDS``: every card
        update asks, and reading the table each time cost two queries per update."""
        with self._lock:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= VIEWERS_FRESH_SECONDS:
                with self.db.transaction() as s:
                    found = HomeViewers(s).all(limit=MAX_VIEWERS)
                self._viewers = {
                    v.user_id: Actor(v.user_id, v.team_id, v.enterprise_id) for v in found
                }
                self._read_at = now
            return self._viewers  # never changed in place: safe to read without the lock

    def people_of(self, approval: ApprovalView) -> Reviewers:
        """Whose lists an approval is on: its requester, everyone who decided on it and every
        holder of an approver role (users, and user groups to expand)."""
        users: dict[str, None] = {approval.requester_id: None}
        groups: dict[str, None] = {}
        policy = self.policy.for_team(approval.run.team_id)
        for action in approval.actions:
            users.update(dict.fromkeys(d.reviewer_id for d in action.decisions))
            for role in action.approver_roles:
                spec = policy.roles.get(role) if role != REQUESTER_ROLE else None
                if spec is not None:
                    users.update(dict.fromkeys(spec.users))
                    groups.update(dict.fromkeys(spec.usergroups))
        return Reviewers(users=tuple(users), usergroups=tuple(groups))
