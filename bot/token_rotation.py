"""Token rotation: with it turned on in the Slack app, a bot token expires after 12 hours and
comes with a refresh token, good for one refresh. A token is refreshed ahead of its expiry (by
Bolt's default margin), once per workspace at a time in this process, and saved to the
installation store, where the other replicas find it instead of spending the old refresh token
(Slack revokes it once used)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackTokenRotationError
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.token_rotation import TokenRotator

from bot.installations import InstallationStore
from bot.settings import Settings

logger = logging.getLogger(__name__)
ROTATION_MINUTES = 120
"""A token is refreshed this long before it expires (Bolt's default, used for Bolt too)."""
LAST_SECONDS = 300
"""A token expiring sooner than this is not used when its refresh fails: a call started with it
could reach Slack after it expired."""
RETRY_SECONDS = 60
"""A refresh that failed is not tried again with the same refresh token for this long: every
call needing the workspace's client would otherwise ask Slack again, one at a time."""


Key = tuple[str | None, str | None]
"""A workspace: its enterprise and team ids."""


class TokenRefresher:
    """Bot tokens good for a while yet: the stored one, or a refreshed one (saved)."""

    def __init__(
        self,
        store: InstallationStore,
        *,
        client_id: str,
        client_secret: str,
        client: WebClient,
        minutes: int = ROTATION_MINUTES,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.client_id = client_id
        self.client_secret = client_secret
        self.client = client
        self.minutes = minutes
        self.now = now
        self._locks: dict[Key, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._failures: dict[Key, tuple[str | None, float, SlackApiError | OSError]] = {}
        """Per workspace, the refresh token last refused, when, and how."""

    def due(self, expires_at: float | None) -> bool:
        """Whether a token expiring then (None: never) is to be refreshed now."""
        return expires_at is not None and expires_at <= self.now() + self.minutes * 60

    def fresh(self, bot: Bot) -> Bot:
        """``bot`` if its token is not due; otherwise the store's latest, refreshed by whoever
        comes first: one refresh per workspace at a time here, the others wait and take it.
        A failed refresh keeps a token that works a while yet, and is not tried again for
        ``RETRY_SECONDS``; once the token is about to expire, raises
        ``SlackTokenRotationError`` (logged) when Slack refuses the refresh, or the network
        error when Slack cannot be reached."""
        if bot.bot_refresh_token is None or not self.due(bot.bot_token_expires_at):
            return bot
        key = (bot.enterprise_id, bot.team_id)
        with self._lock_of(bot):
            stored = self._read(bot)
            if stored is None:
                return bot  # the app was removed meanwhile: nothing to refresh or save
            if stored.bot_refresh_token is None or not self.due(stored.bot_token_expires_at):
                return stored  # refreshed meanwhile, here or by another replica
            failed = self._recent_failure(key, stored)
            if failed is not None:
                return self._kept(stored, failed)
            try:
                refreshed = self._refresh(stored)
            except (SlackApiError, OSError) as exc:
                self._failures[key] = (stored.bot_refresh_token, self.now(), exc)
                return self._unrefreshed(bot, stored, exc)
            self._failures.pop(key, None)
            self._save(stored, refreshed)
            logger.info("the bot token of workspace %s was refreshed", bot.team_id)
            return refreshed

    def usable(self, expires_at: float | None) -> bool:
        """Whether a token expiring then still works for a call started now."""
        return expires_at is None or expires_at > self.now() + LAST_SECONDS

    def _recent_failure(self, key: Key, stored: Bot) -> SlackApiError | OSError | None:
        """How the refresh with this refresh token failed, if it did a moment ago."""
        failed = self._failures.get(key)
        if failed is None or failed[0] != stored.bot_refresh_token:
            return None
        return failed[2] if self.now() < failed[1] + RETRY_SECONDS else None

    def _unrefreshed(self, bot: Bot, stored: Bot, exc: SlackApiError | OSError) -> Bot:
        """After a failed refresh: the token another replica saved meanwhile (it spent the
        refresh token first), else the token at hand while it works, else the failure."""
        elsewhere = self._read(bot)
        if elsewhere is not None and elsewhere.bot_token != stored.bot_token:
            return elsewhere
        error = exc.response.get("error", exc) if isinstance(exc, SlackApiError) else exc
        logger.error(
            "the bot token of workspace %s was not refreshed: %s%s",
            bot.team_id,
            error,
            "; it is used until it expires" if self.usable(stored.bot_token_expires_at) else "",
        )
        return self._kept(stored, exc)

    def _kept(self, stored: Bot, exc: SlackApiError | OSError) -> Bot:
        """The token at hand while it works; else the refresh's failure."""
        if self.usable(stored.bot_token_expires_at):
            return stored
        if isinstance(exc, SlackApiError):
            raise SlackTokenRotationError(exc) from exc
        raise exc.with_traceback(None)

    def _lock_of(self, bot: Bot) -> threading.Lock:
        return self.lock_of(bot.enterprise_id, bot.team_id)

    def lock_of(self, enterprise_id: str | None, team_id: str | None) -> threading.Lock:
        """The workspace's refresh lock: held by a refresh from reading the store to saving
        its answer, and by a removal, so a removal never lands in the middle of one."""
        with self._locks_lock:
            return self._locks.setdefault((enterprise_id, team_id), threading.Lock())

    def _read(self, bot: Bot) -> Bot | None:
        return self.store.find_bot(
            enterprise_id=bot.enterprise_id,
            team_id=bot.team_id,
            is_enterprise_install=bot.is_enterprise_install,
        )

    def _refresh(self, bot: Bot) -> Bot:
        answer = self.client.oauth_v2_access(
            client_id=self.client_id,
            client_secret=self.client_secret,
            grant_type="refresh_token",
            refresh_token=bot.bot_refresh_token,
        )
        refreshed = Bot(**bot.to_dict_for_copying())
        refreshed.bot_token = answer["access_token"]
        refreshed.bot_refresh_token = answer.get("refresh_token")
        refreshed.bot_token_expires_at = int(self.now()) + int(answer["expires_in"])
        return refreshed

    def _save(self, stored: Bot, refreshed: Bot) -> None:
        """Into the installation (which saves its bot too): Bolt reads installations, we read
        bots; both must hold the new token. A bot without its installation is saved alone."""
        installation = self.store.find_installation(
            enterprise_id=stored.enterprise_id,
            team_id=stored.team_id,
            is_enterprise_install=stored.is_enterprise_install,
        )
        if installation is None or installation.bot_token != stored.bot_token:
            self.store.save_bot(refreshed)
            return
        updated = Installation(**installation.to_dict_for_copying())
        updated.bot_token = refreshed.bot_token
        updated.bot_refresh_token = refreshed.bot_refresh_token
        updated.bot_token_expires_at = refreshed.bot_token_expires_at
        self.store.save(updated)


def refresher_for(
    settings: Settings, store: InstallationStore, *, client: WebClient
) -> TokenRefresher:
    """Refreshes with the app's id and secret, through ``client`` (on ``SLACK_API_URL``)."""
    assert settings.slack_client_id is not None and settings.slack_client_secret is not None
    return TokenRefresher(
        store,
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret.get_secret_value(),
        client=client,
    )


class StoreTokenRotator(TokenRotator):
    """Bolt's rotation for incoming requests, done by ``refresher``: on our Slack API URL,
    one refresh at a time, the store read again first."""

    def __init__(self, refresher: TokenRefresher) -> None:
        super().__init__(
            client_id=refresher.client_id,
            client_secret=refresher.client_secret,
            client=refresher.client,
        )
        self.refresher = refresher

    def perform_bot_token_rotation(
        self, *, bot: Bot, minutes_before_expiration: int = ROTATION_MINUTES
    ) -> Bot | None:
        """None when the token is good as it is (as Bolt expects)."""
        fresh = self.refresher.fresh(bot)
        return None if fresh is bot else fresh
