"""The sandbox's side of installs by OAuth: Slack's consent page (a user allows the app in one
workspace: a one-time code), ``oauth.v2.access`` (the code, with the app's id and secret, for
that workspace's bot token) and, with token rotation on, expiring tokens and their refresh."""

from __future__ import annotations

import base64
import secrets
import threading
import time
from typing import Any

from bot.sandbox.validation import SlackApiError

SANDBOX_CLIENT_ID = "1000.2000"
SANDBOX_CLIENT_SECRET = "sandbox-client-secret"
SANDBOX_APP_ID = "A0SANDBOX"
TOKEN_HOURS = 12
"""How long Slack's expiring tokens last."""


def check_client(args: dict[str, Any], client: tuple[str, str] | None) -> None:
    """Only the app's own id and secret (basic auth or arguments) reach ``oauth.v2.access``."""
    client = client or (str(args.get("client_id", "")), str(args.get("client_secret", "")))
    if client != (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET):
        raise SlackApiError("invalid_client_id" if client[0] else "bad_client_secret")


class InstallGrants:
    def __init__(self) -> None:
        self._codes: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def grant(self, team_id: str, *, user: str) -> str:
        code = f"{team_id}.{secrets.token_hex(8)}"
        with self._lock:
            self._codes[code] = (team_id, user)
        return code

    def exchange(self, args: dict[str, Any], client: tuple[str, str] | None) -> tuple[str, str]:
        """The (team, user) a code was granted for, once, to the app's own id and secret."""
        check_client(args, client)
        with self._lock:
            granted = self._codes.pop(str(args.get("code", "")), None)
        if granted is None:
            raise SlackApiError("invalid_code")
        return granted


class ExpiringTokens:
    """Token rotation, as Slack does it once the app turns it on: installs get a bot token
    that expires and a refresh token; ``oauth.v2.access`` with ``grant_type=refresh_token``
    trades a refresh token, once, for a new pair. An old token works until it expires."""

    def __init__(self) -> None:
        self.install_seconds: int | None = None
        """Set: installs get tokens lasting this long (``enable``); None: tokens that last."""
        self.refresh_seconds = TOKEN_HOURS * 3600
        self.refreshes: list[str] = []
        """The workspace of each refresh, in order."""
        self.expired_uses = 0
        """Calls refused because their token had expired."""
        self._tokens: dict[str, tuple[str, float]] = {}
        self._refresh_tokens: dict[str, str] = {}
        self._lock = threading.Lock()

    def enable(self, *, install_seconds: int = TOKEN_HOURS * 3600) -> None:
        self.install_seconds = install_seconds

    def issue(self, team: str, *, seconds: int) -> tuple[str, str]:
        """A new bot token for ``team`` lasting ``seconds`` (negative: already expired) and
        the refresh token that replaces it."""
        token = f"xoxe.xoxb-{team.lower()}-{secrets.token_hex(6)}"
        refresh = f"xoxe-1-{team.lower()}-{secrets.token_hex(6)}"
        with self._lock:
            self._tokens[token] = (team, time.time() + seconds)
            self._refresh_tokens[refresh] = team
        return token, refresh

    def expire(self, token: str) -> None:
        """``token`` expires now (as 12 hours passing would)."""
        with self._lock:
            team, _ = self._tokens[token]
            self._tokens[token] = (team, time.time())

    def team_of(self, token: str | None) -> str | None:
        """The workspace of an expiring token (None if it is not one); ``token_expired``."""
        with self._lock:
            known = self._tokens.get(token or "")
            if known is None:
                return None
            if known[1] <= time.time():
                self.expired_uses += 1
                raise SlackApiError("token_expired")
        return known[0]

    def refresh(self, args: dict[str, Any], client: tuple[str, str] | None) -> dict[str, Any]:
        """A new pair for a refresh token, which is then spent (as Slack answers it)."""
        check_client(args, client)
        with self._lock:
            team = self._refresh_tokens.pop(str(args.get("refresh_token", "")), None)
        if team is None:
            raise SlackApiError("invalid_refresh_token")
        token, refresh = self.issue(team, seconds=self.refresh_seconds)
        with self._lock:
            self.refreshes.append(team)
        return {
            "ok": True,
            "token_type": "bot",
            "access_token": token,
            "refresh_token": refresh,
            "expires_in": self.refresh_seconds,
            "team": {"id": team},
        }

    def installed(self, team: str, token: str) -> tuple[str, tuple[str, int] | None]:
        """The token an install gets: ``token`` as it is, or (rotation on) an expiring one with
        its refresh token and lifetime."""
        if self.install_seconds is None:
            return token, None
        expiring, refresh = self.issue(team, seconds=self.install_seconds)
        return expiring, (refresh, self.install_seconds)


def access_answer(
    *, team: str, user: str, token: str, bot_user: str, rotation: tuple[str, int] | None = None
) -> dict[str, Any]:
    """``oauth.v2.access`` as Slack answers it for a bot install (no user token asked for);
    ``rotation``: the refresh token and the seconds the token lasts."""
    expiring = {} if rotation is None else {"refresh_token": rotation[0], "expires_in": rotation[1]}
    return {
        "ok": True,
        "app_id": SANDBOX_APP_ID,
        "authed_user": {"id": user},
        "scope": "chat:write,commands",
        "token_type": "bot",
        "access_token": token,
        "bot_user_id": bot_user,
        "team": {"id": team, "name": f"Sandbox {team}"},
        "enterprise": None,
        "is_enterprise_install": False,
        **expiring,
    }


def basic_auth(header: str | None) -> tuple[str, str] | None:
    """HTTP basic auth (how slack_sdk sends the app's id and secret to ``oauth.v2.access``)."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:].strip()).decode("utf-8").partition(":")
    except ValueError:
        return None
    return user, password
