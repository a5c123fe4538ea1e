"""Slack user group membership, cached: usergroups.users.list is rate-limited and plan-gated."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

logger = logging.getLogger(__name__)


class UsergroupDirectory:
    def __init__(
        self, client: WebClient, *, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def members(self, group_id: str) -> frozenset[str]:
        now = self.clock()
        with self._lock:
            cached = self._cache.get(group_id)
        if cached and now - cached[0] < self.ttl:
            return cached[1]
        try:
            users = frozenset(self.client.usergroups_users_list(usergroup=group_id)["users"])
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error != "plan_upgrade_required":
                # Transient (rate limit, outage): keep what we knew, ask again next time.
                logger.warning("user group %s look-up failed (%s)", group_id, error)
                return cached[1] if cached else frozenset()
            logger.warning(
                "user groups need a paid Slack plan; group %s grants nothing, only user ids in "
                "the policy count",
                group_id,
            )
            users = frozenset()
        with self._lock:
            self._cache[group_id] = (now, users)
        return users

    def forget(self, group_id: str | None = None) -> None:
        """Drop cached members (e.g. on ``subteam_members_changed``)."""
        with self._lock:
            if group_id is None:
                self._cache.clear()
            else:
                self._cache.pop(group_id, None)
