"""Installs by OAuth on our database: slack_sdk's SQLAlchemy installation and state stores on
the store's engine (their tables come from our migration 0015, never ``create_tables``), with
every token encrypted at rest when ``CHECKPOINT_ENCRYPTION_KEY`` is set."""

from __future__ import annotations

import base64
from typing import Any

from slack_bolt.authorization.authorize import InstallationStoreAuthorize
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from slack_sdk.oauth.token_rotation import TokenRotator
from sqlalchemy import String
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.types import TypeDecorator

from agent_runtime.encryption import CIPHER, AesGcmCipher
from bot.settings import SLACK_API_URL, Settings
from store.installs import installed_teams

TOKEN_COLUMNS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token")
SEALED = f"{CIPHER}:"
STATE_SECONDS = 600
"""How long an install link works between /slack/install and Slack's redirect back."""
BOT_SCOPES = (
    "chat:write",
    "chat:write.public",
    "channels:history",
    "groups:history",
    "im:write",
    "commands",
    "usergroups:read",
)
"""What an install asks for: the bot scopes of ``slack-manifest.yaml``."""


class SealedToken(TypeDecorator[str]):
    """A token column whose values are AES-GCM sealed on the way in and opened on the way out;
    a plain value (stored before the key was set) reads as it is."""

    impl = String
    cache_ok = False
    """Two keys would share one cache key: statements with sealed columns are not cached (a
    few small queries per request)."""

    def __init__(self, key: bytes) -> None:
        super().__init__()
        self.cipher = AesGcmCipher(key)

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        _, sealed = self.cipher.encrypt(str(value).encode("utf-8"))
        return SEALED + base64.b64encode(sealed).decode("ascii")

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        stored = str(value)
        if not stored.startswith(SEALED):
            return stored
        sealed = base64.b64decode(stored[len(SEALED) :])
        return self.cipher.decrypt(CIPHER, sealed).decode("utf-8")


class InstallationStore(SQLAlchemyInstallationStore):
    """slack_sdk's store, its token columns sealed with ``key`` (when there is one)."""

    def __init__(self, *, client_id: str, engine: Engine, key: bytes | None) -> None:
        super().__init__(client_id=client_id, engine=engine)
        if key is None:
            return
        for table in (self.installations, self.bots):
            for name in TOKEN_COLUMNS:
                if name in table.c:
                    table.c[name].type = SealedToken(key)

    def create_tables(self) -> None:
        raise NotImplementedError("the tables are made by the store's migrations (0015)")

    def teams(self) -> list[str]:
        """The workspaces holding a bot token of this app, the earliest install first."""
        return installed_teams(self.engine, client_id=self.client_id)


class OAuthStateStore(SQLAlchemyOAuthStateStore):
    """slack_sdk's state store; its table is made by our migrations."""

    def create_tables(self) -> None:
        raise NotImplementedError("the tables are made by the store's migrations (0015)")


def authorize_url(api_url: str) -> str:
    """Slack's authorize page beside its Web API (``.../api/`` -> ``.../oauth/v2/authorize``),
    so a test double serving the API serves the page too."""
    if api_url == SLACK_API_URL:
        return "https://slack.com/oauth/v2/authorize"
    return api_url.removesuffix("/").removesuffix("/api") + "/oauth/v2/authorize"


def oauth_settings(
    settings: Settings,
    *,
    store: InstallationStore,
    engine: Engine,
    rotator: TokenRotator,
    rotation_minutes: int,
) -> OAuthSettings:
    """Bolt's OAuth flow: ``/slack/install`` redirects to Slack's consent page (with a state
    kept in our database and in a cookie), ``/slack/oauth_redirect`` exchanges the code. Each
    request is authorized with its workspace's stored token, refreshed by ``rotator`` when it
    expires within ``rotation_minutes`` (Bolt's own would call slack.com, unlocked)."""
    assert settings.slack_client_id is not None and settings.slack_client_secret is not None
    oauth = OAuthSettings(
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret.get_secret_value(),
        scopes=list(BOT_SCOPES),
        install_page_rendering_enabled=False,
        authorization_url=authorize_url(settings.slack_api_url),
        installation_store=store,
        state_store=OAuthStateStore(expiration_seconds=STATE_SECONDS, engine=engine),
        state_expiration_seconds=STATE_SECONDS,
        token_rotation_expiration_minutes=rotation_minutes,
    )
    assert isinstance(oauth.authorize, InstallationStoreAuthorize)
    oauth.authorize.token_rotator = rotator
    return oauth
