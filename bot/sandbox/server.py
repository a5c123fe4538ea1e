"""A local Slack Web API: the methods the bot calls, refusing what Slack refuses.

It checks the bot token, validates blocks and views with ``slack_sdk.models`` (``invalid_blocks``
like Slack), keeps channels, threads and views, enforces trigger ids and serves response URLs.
The methods' own answers are in ``web_methods``; here: who is calling, records, misbehaviours.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from bot.sandbox.installs import ExpiringTokens, InstallGrants, access_answer
from bot.sandbox.misbehaviour import HOLD_LIMIT, Dropped, Misbehaviour, Misbehaviours
from bot.sandbox.socket_mode import SocketModeRelay
from bot.sandbox.state import RESPONSE_URL_USES, SandboxState
from bot.sandbox.transport import ApiHandler
from bot.sandbox.validation import SlackApiError, validate_blocks
from bot.sandbox.web_methods import WebMethods

logger = logging.getLogger(__name__)
SANDBOX_TOKEN = "xoxb-sandbox-token"
SANDBOX_APP_TOKEN = "xapp-sandbox-token"
STOP_POLL = 0.02
"""Seconds between the serving loop's looks for a stop: ``stop`` waits up to this long (the
standard library's default, 0.5 s, spent once per test added minutes to the test suite)."""


class SlackSandbox:
    def __init__(
        self,
        *,
        users: dict[str, str] | None = None,
        usergroups: dict[str, list[str]] | None = None,
        token: str = SANDBOX_TOKEN,
        plan_gated: bool = False,
    ) -> None:
        """``plan_gated``: answer user group look-ups as a free workspace does. ``failing``:
        Web API methods that answer with an error instead (e.g. ``ratelimited``), for tests
        of what the bot does when Slack refuses."""
        self.token = token
        self.plan_gated = plan_gated
        self.failing: dict[str, str] = {}
        self.misbehaviours = Misbehaviours()
        self.state = SandboxState(
            users=dict(users or {}),
            usergroups={group: list(members) for group, members in (usergroups or {}).items()},
        )
        self._server: ThreadingHTTPServer | None = None
        self.socket_mode: SocketModeRelay | None = None
        self.team_tokens = {self.state.team_id: token}
        """Each workspace's bot token (a second one: ``add_workspace``)."""
        self.bot_users = {self.state.team_id: self.state.bot_user_id}
        self.installs = InstallGrants()
        self.expiring = ExpiringTokens()
        """Token rotation (off until ``expiring.enable``)."""
        self._caller = threading.local()
        self._methods = WebMethods(self)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    @property
    def api_url(self) -> str:
        return self.base_url + "api/"

    def start(self) -> SlackSandbox:
        sandbox = self

        class Handler(ApiHandler):
            owner = sandbox

        class Server(ThreadingHTTPServer):
            request_queue_size = 512  # bursts of concurrent calls, as Slack would absorb them

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": STOP_POLL}, daemon=True
        ).start()
        return self

    def add_workspace(
        self,
        team_id: str,
        *,
        users: dict[str, str],
        token: str | None = None,
        channels: tuple[str, ...] = (),
    ) -> str:
        """Another workspace, with its own bot token, bot user and people (and ``channels``,
        where no other workspace's token may post); returns the token."""
        token = token or f"xoxb-{team_id.lower()}-sandbox"

        def add() -> None:
            self.team_tokens[team_id] = token
            self.bot_users[team_id] = f"U0BOT{team_id.removeprefix('T')}"
            self.state.users.update(users)
            self.state.user_teams.update(dict.fromkeys(users, team_id))
            self.state.channel_teams.update(dict.fromkeys(channels, team_id))

        self.state.change(add)
        return token

    def grant(self, team_id: str, *, user: str) -> str:
        """``user`` allows the app on Slack's consent page: a one-time code for
        ``oauth.v2.access``, as Slack adds it to the redirect back to the app."""
        if team_id not in self.team_tokens:
            raise KeyError(f"no workspace {team_id} in the sandbox")
        return self.installs.grant(team_id, user=user)

    def caller_team(self) -> str:
        """The workspace whose token made the call being served (on its own thread)."""
        return str(getattr(self._caller, "team", self.state.team_id))

    def misbehave(self, method: str, **how: Any) -> Misbehaviour:
        """Make the next matching call of ``method`` go wrong (see ``Misbehaviour``)."""
        return self.misbehaviours.add(Misbehaviour(method, **how))

    def stop(self) -> None:
        self.misbehaviours.release_all()
        if self.socket_mode is not None:
            self.socket_mode.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def response_url(self) -> str:
        key = f"R{self.state.next_id()}"
        self.state.change(lambda: self.state.response_urls.__setitem__(key, 0))
        return f"{self.base_url}response/{key}"

    # Web API methods ----------------------------------------------------------------------

    def call(
        self,
        method: str,
        args: dict[str, Any],
        token: str | None,
        *,
        client: tuple[str, str] | None = None,
    ) -> dict[str, Any]:
        """``client``: the app's id and secret (HTTP basic auth), for ``oauth.v2.access``."""
        if method == "apps.connections.open":
            return self._connections_open(token)
        if method == "oauth.v2.access":
            wrong = self.misbehaviours.take(method, args)
            return self._misbehaving(wrong, lambda: self._oauth_v2_access(args, client))
        team = next((t for t, known in self.team_tokens.items() if known == token), None)
        team = team or self.expiring.team_of(token)
        if team is None:
            raise SlackApiError("invalid_auth" if token else "not_authed")
        self._caller.team = team
        handler = self._methods.handler(method)
        if handler is None:
            raise SlackApiError("unknown_method")

        def record() -> None:
            self.state.calls.append(method)
            self.state.calls_by_team.append((method, team))

        self.state.change(record)
        if method in self.failing:
            raise SlackApiError(self.failing[method])
        wrong = self.misbehaviours.take(method, args)
        return self._misbehaving(wrong, lambda: {"ok": True, **handler(args)})

    @staticmethod
    def _misbehaving(
        wrong: Misbehaviour | None, answer_of: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """The call's answer, gone wrong as ``wrong`` says (if any)."""
        if wrong is None:
            return answer_of()
        if wrong.late:
            wrong.release.wait(timeout=HOLD_LIMIT)
        answer = answer_of() if wrong.effect_happens else None
        if wrong.hold:
            wrong.release.wait(timeout=HOLD_LIMIT)
        if wrong.drop:
            raise Dropped(wrong.method)
        if wrong.error is not None or answer is None:
            raise SlackApiError(wrong.error or "internal_error")
        return answer

    def _connections_open(self, token: str | None) -> dict[str, Any]:
        """Socket Mode: only the app-level token may open a connection."""
        if token != SANDBOX_APP_TOKEN:
            raise SlackApiError("invalid_auth" if token else "not_authed")
        if self.socket_mode is None:
            self.socket_mode = SocketModeRelay().start()
        return {"ok": True, "url": self.socket_mode.url}

    def _oauth_v2_access(
        self, args: dict[str, Any], client: tuple[str, str] | None
    ) -> dict[str, Any]:
        """An install's code for its token, or (token rotation) a refresh token for a new one."""
        if args.get("grant_type") == "refresh_token":
            answer = self.expiring.refresh(args, client)
            self.state.change(lambda: self.state.calls.append("oauth.v2.access"))
            return answer
        team, user = self.installs.exchange(args, client)
        self.state.change(lambda: self.state.calls.append("oauth.v2.access"))
        token, rotation = self.expiring.installed(team, self.team_tokens[team])
        bot_user = self.bot_users[team]
        return access_answer(
            team=team, user=user, token=token, bot_user=bot_user, rotation=rotation
        )

    def respond(self, key: str, payload: dict[str, Any]) -> None:
        """A response URL takes a few uses, counted and spent in one step."""

        def use() -> None:
            uses = self.state.response_urls.get(key)
            if uses is None or uses >= RESPONSE_URL_USES:
                raise SlackApiError("used_url")
            if payload.get("blocks"):
                validate_blocks(payload["blocks"])
            self.state.response_urls[key] = uses + 1
            self.state.responses.append({"url": key, **payload})

        self.state.change(use)
