"""Slack user group membership, cached: usergroups.users.list is rate-limited and plan-gated."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime.errors import MembershipUnconfirmed

logger = logging.getLogger(__name__)
DEFINITE = frozenset({"plan_upgrade_required", "no_such_subteam"})
"""Answers that settle membership (nobody, through this group); any other error is transient."""


class UsergroupDirectory:
    def __init__(
        self,
        client_for: Callable[[str], WebClient | None],
        *,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``client_for(group)``: the client of the group's workspace; None when no workspace
        is known for it (several workspaces, a group outside the policy's ``teams``
        sections): that group grants nothing and only user ids in the policy count."""
        self.client_for = client_for
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
        client = self.client_for(group_id)
        if client is None:
            logger.warning("user group %s grants nothing: no workspace known for it", group_id)
            with self._lock:
                self._cache[group_id] = (now, frozenset())
            return frozenset()
        try:
            users = frozenset(client.usergroups_users_list(usergroup=group_id)["users"])
        except OSError as exc:
            raise self._unconfirmed(group_id, type(exc).__name__) from None
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error not in DEFINITE:
                # Transient (rate limit, outage): members we knew may have been removed since,
                # so nobody is granted anything through this group until Slack answers again.
                raise self._unconfirmed(group_id, str(error)) from None
            logger.warning(
                "user group %s grants nothing (%s); only user ids in the policy count",
                group_id,
                error,
            )
            users = frozenset()
        with self._lock:
            self._cache[group_id] = (now, users)
        return users

    @staticmethod
    def _unconfirmed(group_id: str, error: str) -> MembershipUnconfirmed:
        logger.warning("user group %s look-up failed (%s); failing closed", group_id, error)
        return MembershipUnconfirmed(
            f"Slack could not confirm the members of user group {group_id} right now ({error}), "
            "so nothing was decided. Please try again in a minute."
        )

    def forget(self, group_id: str | None = None) -> None:
        """Drop cached members (e.g. on ``subteam_members_changed``)."""
        with self._lock:
            if group_id is None:
                self._cache.clear()
            else:
                self._cache.pop(group_id, None)
