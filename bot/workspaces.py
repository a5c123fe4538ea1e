"""Which Slack client speaks for which workspace.

One bot token (``SLACK_BOT_TOKEN``): one client, whatever the team. Installs by OAuth: each
team's bot token from the installation store, its client built once (timed, like every client
of ours) and kept for a short while, so a token replaced by a new install is picked up. With
token rotation, a token is refreshed before it expires (``bot.token_rotation``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from slack_sdk import WebClient
from slack_sdk.errors import SlackTokenRotationError
from slack_sdk.oauth.installation_store import Bot

from agent_runtime.policy import Policy
from bot.installations import InstallationStore
from bot.token_rotation import TokenRefresher

logger = logging.getLogger(__name__)
CLIENT_TTL = 60.0
"""Seconds a team's client is reused before its token is read from the store again."""


class WorkspaceNotInstalled(Exception):
    """The bot is not installed in this workspace (never installed, or uninstalled)."""

    def __init__(self, team_id: str | None, *, reason: str | None = None) -> None:
        super().__init__(reason or f"the bot is not installed in workspace {team_id or '(none)'}")
        self.team_id = team_id


class TokenNotRefreshed(WorkspaceNotInstalled):
    """The workspace's bot token is about to expire and Slack refused to refresh it: nothing
    can be said there while it refuses (a spent or revoked refresh token: until a new install)."""

    def __init__(self, team_id: str, error: str) -> None:
        reason = f"the bot token of workspace {team_id} was not refreshed ({error})"
        super().__init__(team_id, reason=reason)
        self.error = error
        """Slack's error code for the refused refresh."""


class Workspaces(Protocol):
    def client(self, team_id: str | None) -> WebClient:
        """The client authorized for ``team_id``; raises ``WorkspaceNotInstalled``."""

    def url(self, team_id: str | None) -> str | None:
        """The workspace's URL, for links to cards and runs (None if unknown)."""

    def bot_user(self, team_id: str | None) -> str | None:
        """The bot's own user id there: only its messages can be its cards."""

    def removed(self, team_id: str | None) -> None:
        """The workspace removed the app, or revoked its bot token."""

    def installed_teams(self) -> list[str]:
        """The workspaces that installed the app by OAuth, the earliest first; none with one
        bot token (its client speaks for every team)."""


class SingleWorkspace:
    """One token: the same client for every team (the default, unchanged by multi-workspace)."""

    def __init__(self, client: WebClient, *, url: str | None = None) -> None:
        self._client = client
        self._url = url
        self._bot_user: str | None = None

    def client(self, team_id: str | None) -> WebClient:
        return self._client

    def url(self, team_id: str | None) -> str | None:
        return self._url

    def bot_user(self, team_id: str | None) -> str | None:
        if self._bot_user is None:
            self._bot_user = self._client.auth_test().get("user_id")
        return self._bot_user

    def removed(self, team_id: str | None) -> None:
        logger.warning("workspace %s removed the app: SLACK_BOT_TOKEN no longer works", team_id)

    def installed_teams(self) -> list[str]:
        return []


@dataclass
class _Team:
    client: WebClient
    bot_user: str | None
    read_at: float
    url: str | None = None
    url_known: bool = False
    expires_at: float | None = None


class InstalledWorkspaces:
    """Clients per team from the installation store; ``make_client(token)`` builds one;
    ``refresher`` (installs by OAuth) refreshes expiring tokens."""

    def __init__(
        self,
        store: InstallationStore,
        *,
        make_client: Callable[[str], WebClient],
        ttl: float = CLIENT_TTL,
        clock: Callable[[], float] = time.monotonic,
        refresher: TokenRefresher | None = None,
    ) -> None:
        self.store = store
        self.refresher = refresher
        self.make_client = make_client
        self.ttl = ttl
        self.clock = clock
        self._teams: dict[str, _Team] = {}
        self._removals: dict[str, int] = {}
        """Per team, how many times it was removed: a token read before a removal is not
        cached after it."""
        self._lock = threading.Lock()

    def client(self, team_id: str | None) -> WebClient:
        return self._team(team_id).client

    def bot_user(self, team_id: str | None) -> str | None:
        return self._team(team_id).bot_user

    def url(self, team_id: str | None) -> str | None:
        """From ``auth.test``, asked once per token; a link without it is plain text."""
        team = self._team(team_id)
        if not team.url_known:
            try:
                team.url = team.client.auth_test().get("url")
            except Exception:
                logger.warning("no URL for workspace %s", team_id, exc_info=True)
            team.url_known = True
        return team.url

    def removed(self, team_id: str | None) -> None:
        """Its installations and bot tokens are deleted from the store, and its client with
        them: a token Slack revoked is of no use, and kept it would only be a secret at rest."""
        if not team_id:
            return
        with self._refreshes_of(team_id):  # a refresh under way saves first, then goes
            self.store.delete_bot(enterprise_id=None, team_id=team_id)
            self.store.delete_installation(enterprise_id=None, team_id=team_id)
        with self._lock:
            self._teams.pop(team_id, None)
            self._removals[team_id] = self._removals.get(team_id, 0) + 1
        logger.info("workspace %s removed the app; its tokens are deleted", team_id)

    def installed_teams(self) -> list[str]:
        return self.store.teams()

    def _refreshes_of(self, team_id: str) -> AbstractContextManager[object]:
        if self.refresher is None:
            return nullcontext()
        return self.refresher.lock_of(None, team_id)

    def _team(self, team_id: str | None) -> _Team:
        if not team_id:
            raise WorkspaceNotInstalled(team_id)
        now = self.clock()
        with self._lock:
            known = self._teams.get(team_id)
            removals = self._removals.get(team_id, 0)
        if known is not None and now - known.read_at < self.ttl and not self._due(known):
            return known
        bot = self.store.find_bot(enterprise_id=None, team_id=team_id)
        if bot is None or not bot.bot_token:
            with self._lock:
                self._teams.pop(team_id, None)
            raise WorkspaceNotInstalled(team_id)
        bot = self._fresh(team_id, bot)
        token, expires = str(bot.bot_token), bot.bot_token_expires_at
        if known is not None and known.client.token == token:
            fresh = _Team(known.client, bot.bot_user_id, now, known.url, known.url_known, expires)
        else:
            fresh = _Team(self.make_client(token), bot.bot_user_id, now, expires_at=expires)
        with self._lock:
            if self._removals.get(team_id, 0) == removals:
                self._teams[team_id] = fresh
        return fresh

    def _due(self, team: _Team) -> bool:
        return self.refresher is not None and self.refresher.due(team.expires_at)

    def _fresh(self, team_id: str, bot: Bot) -> Bot:
        """A token that expires soon is refreshed first; a refused refresh fails this
        workspace only (logged by the refresher)."""
        if self.refresher is None:
            return bot
        try:
            return self.refresher.fresh(bot)
        except SlackTokenRotationError as exc:
            raise TokenNotRefreshed(team_id, exc.api_error.response.get("error", "")) from exc


def group_clients(policy: Policy, workspaces: Workspaces) -> Callable[[str], WebClient | None]:
    """With several workspaces, a user group is looked up in the workspace whose ``teams``
    section of the policy names it; any other group (or one of a workspace not installed)
    has no client, and grants nothing."""
    teams = {
        group: team
        for team, section in policy.teams.items()
        for role in section.roles.values()
        for group in role.usergroups
    }

    def client_for(group: str) -> WebClient | None:
        team = teams.get(group)
        if team is None:
            return None
        try:
            return workspaces.client(team)
        except WorkspaceNotInstalled:
            return None

    return client_for
