"""The Home tab: published when a user opens it, and republished, off the decision path, for
those who opened it once an approval or a run they are part of changes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from agent_runtime.authorization import Actor
from agent_runtime.notifier import MessageRef
from agent_runtime.overview import Overview
from agent_runtime.views import ApprovalView, DigestView, Reviewers, RunView
from bot.blocks.home import home_view
from bot.executor import BoundedExecutor
from bot.slack_notifier import SlackNotifier
from bot.workspaces import Workspaces

logger = logging.getLogger(__name__)
HOME_LIMIT = 50
"""Rows each Home section reads (it shows fewer and says how many more)."""
MAX_REFRESH = 50
"""Homes republished for one change at most: the rest are fresh when next opened."""


def _no_groups(_group: str) -> frozenset[str]:
    return frozenset()


class HomeTab:
    def __init__(
        self,
        *,
        workspaces: Workspaces,
        overview: Overview,
        usergroup_members: Callable[[str], frozenset[str]] = _no_groups,
        executor: BoundedExecutor | None = None,
    ) -> None:
        self.workspaces = workspaces
        self.overview = overview
        self.usergroup_members = usergroup_members
        self.executor = executor or BoundedExecutor(workers=1, queue=200, name="approval-home")
        self._queued: set[str] = set()
        self._lock = threading.Lock()

    def opened(self, actor: Actor) -> None:
        """``app_home_opened``: remember the viewer (for refreshes), then publish."""
        self.overview.remember_viewer(actor)
        self.publish(actor)

    def publish(self, actor: Actor) -> None:
        """Through the viewer's own workspace."""
        home = self.overview.home(actor, limit=HOME_LIMIT)
        url = self.workspaces.url(actor.team_id)
        self.workspaces.client(actor.team_id).views_publish(
            user_id=actor.user_id, view=home_view(home, workspace_url=url)
        )

    # Refreshes: called by the notifier, on whatever thread told it -------------------------

    def approval_changed(self, approval: ApprovalView) -> None:
        self._refresh_later(self.overview.people_of(approval))

    def run_changed(self, run: RunView) -> None:
        self._refresh_later(Reviewers(users=(run.requester_id,), usergroups=()))

    def _refresh_later(self, people: Reviewers) -> None:
        """Never raises: a Home that cannot be refreshed is fresh when next opened."""
        if self.executor.submit(self._refresh, people) is None:
            logger.warning("home refresh pool full; %d users not refreshed", len(people.users))

    def _refresh(self, people: Reviewers) -> None:
        users = set(people.users)
        if people.usergroups and self.overview.other_viewers(users):
            # Slack is asked for a group's members (rate limited, cached) only when someone
            # besides the named users has opened the Home tab at all.
            users |= set(self._members(people.usergroups))
        for actor in self.overview.viewers_among(users, limit=MAX_REFRESH):
            with self._lock:
                if actor.user_id in self._queued:
                    continue  # a refresh of theirs is waiting already: it will see this change
                self._queued.add(actor.user_id)
            if self.executor.submit(self._publish_one, actor) is None:
                with self._lock:
                    self._queued.discard(actor.user_id)

    def _members(self, groups: Iterable[str]) -> list[str]:
        found: list[str] = []
        for group in groups:
            try:
                found += self.usergroup_members(group)
            except Exception:
                logger.warning("members of %s unknown; their Homes are not refreshed", group)
        return found

    def _publish_one(self, actor: Actor) -> None:
        with self._lock:
            self._queued.discard(actor.user_id)  # a change from now on queues it again
        try:
            self.publish(actor)
        except Exception:
            logger.exception("could not refresh the Home tab of %s", actor.user_id)

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self.executor.wait_idle(timeout)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False)


class HomeRefreshingNotifier(SlackNotifier):
    """The Slack notifier, and after each card posted, card updated (a decision, a resume),
    expiry or finished run, a Home refresh for the people it concerns; ``watch`` binds the
    Home tab once the engine it reads exists."""

    home: HomeTab | None = None

    def watch(self, home: HomeTab) -> None:
        self.home = home

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        try:
            return super().approval_requested(approval)
        finally:
            self._approval(approval)

    def approval_updated(self, approval: ApprovalView) -> None:
        try:
            super().approval_updated(approval)
        finally:
            self._approval(approval)

    def approval_expired(self, approval: ApprovalView) -> None:
        try:
            super().approval_expired(approval)
        finally:
            self._approval(approval)

    def run_finished(self, run: RunView) -> None:
        try:
            super().run_finished(run)
        finally:
            if self.home is not None:
                self.home.run_changed(run)

    def digest_posted(self, digest: DigestView) -> MessageRef | None:
        try:
            return super().digest_posted(digest)
        finally:
            self._digest(digest)

    def digest_updated(self, digest: DigestView) -> None:
        try:
            super().digest_updated(digest)
        finally:
            self._digest(digest)

    def _digest(self, digest: DigestView) -> None:
        """A digest's approvals are on their people's lists as cards' are."""
        for approval in digest.approvals:
            self._approval(approval)

    def _approval(self, approval: ApprovalView) -> None:
        if self.home is not None:
            self.home.approval_changed(approval)
