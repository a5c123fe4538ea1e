"""The sandbox's side of installs by OAuth: Slack's consent page (a user allows the app in one
workspace: a one-time code) and ``oauth.v2.access`` (the code, with the app's id and secret,
for that workspace's bot token)."""

from __future__ import annotations

import base64
import secrets
import threading
from typing import Any

from bot.sandbox.validation import SlackApiError

SANDBOX_CLIENT_ID = "1000.2000"
SANDBOX_CLIENT_SECRET = "sandbox-client-secret"
SANDBOX_APP_ID = "A0SANDBOX"


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
        client = client or (str(args.get("client_id", "")), str(args.get("client_secret", "")))
        if client != (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET):
            raise SlackApiError("invalid_client_id" if client[0] else "bad_client_secret")
        with self._lock:
            granted = self._codes.pop(str(args.get("code", "")), None)
        if granted is None:
            raise SlackApiError("invalid_code")
        return granted


def access_answer(*, team: str, user: str, token: str, bot_user: str) -> dict[str, Any]:
    """``oauth.v2.access`` as Slack answers it for a bot install (no user token asked for)."""
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
