"""How the bot reaches Slack: timed clients that retry, the token checked once at start, and
one workspace with one bot token or workspaces installed by OAuth, each with its own client."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.error import URLError

from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from bot.installations import InstallationStore, oauth_settings
from bot.metrics import Metrics
from bot.settings import ConfigError, Settings
from bot.timed_client import TimedWebClient
from bot.token_rotation import StoreTokenRotator, refresher_for
from bot.workspaces import InstalledWorkspaces, SingleWorkspace, Workspaces
from store.db import Database


def slack_client(
    settings: Settings, *, metrics: Metrics | None = None, token: str | None = None
) -> WebClient:
    """Timed, with retries; ``token`` defaults to ``SLACK_BOT_TOKEN`` (if set) unless
    installing by OAuth, where each workspace has its own."""
    if token is None and settings.slack_bot_token is not None and not settings.multi_workspace:
        token = settings.slack_bot_token.get_secret_value()
    return TimedWebClient(
        observe=(metrics or Metrics()).slack_call,
        token=token,
        base_url=settings.slack_api_url,
        # Passing retry_handlers replaces slack_sdk's default (connection errors): keep it.
        retry_handlers=[
            ConnectionErrorRetryHandler(),
            RateLimitErrorRetryHandler(max_retry_count=2),
        ],
    )


def verify_slack(client: WebClient, settings: Settings) -> str | None:
    """Fail at start, in one line, when Slack is unreachable or refuses the token; return the
    workspace's URL (for links to runs)."""
    sdk_logger = logging.getLogger("slack_sdk.web.base_client")
    sdk_logger.disabled = True  # our message below says it once, without a traceback
    try:
        return client.auth_test().get("url")
    except SlackApiError as exc:
        error = exc.response.get("error", "unknown_error")
        raise ConfigError(f"SLACK_BOT_TOKEN: Slack refused the token ({error})") from None
    except (OSError, URLError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(
            f"SLACK_API_URL: cannot reach {settings.slack_api_url} ({reason})"
        ) from None
    finally:
        sdk_logger.disabled = False


@dataclass
class SlackSide:
    """How the bot reaches Slack: the workspaces' clients, the client Bolt starts from, and
    (installing by OAuth) Bolt's OAuth settings."""

    workspaces: Workspaces
    client: WebClient
    oauth: OAuthSettings | None = None

    @property
    def single(self) -> WebClient | None:
        """The one workspace's client, with one bot token; None with several workspaces."""
        return self.client if self.oauth is None else None


def single_workspace(settings: Settings, metrics: Metrics) -> SlackSide:
    client = slack_client(settings, metrics=metrics)
    return SlackSide(SingleWorkspace(client, url=verify_slack(client, settings)), client)


def installed_workspaces(
    settings: Settings, metrics: Metrics, *, db: Database, key: bytes | None
) -> SlackSide:
    """Tokens per team from our database (sealed with ``key`` when set), refreshed before
    they expire (token rotation) for outbound calls and incoming requests alike."""
    assert settings.slack_client_id is not None
    store = InstallationStore(client_id=settings.slack_client_id, engine=db.engine, key=key)
    refresher = refresher_for(settings, store, client=slack_client(settings, metrics=metrics))
    workspaces = InstalledWorkspaces(
        store,
        make_client=lambda token: slack_client(settings, metrics=metrics, token=token),
        refresher=refresher,
    )
    oauth = oauth_settings(
        settings,
        store=store,
        engine=db.engine,
        rotator=StoreTokenRotator(refresher),
        rotation_minutes=refresher.minutes,
    )
    return SlackSide(workspaces, slack_client(settings, metrics=metrics), oauth)
