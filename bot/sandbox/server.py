"""A local Slack Web API: the methods the bot calls, refusing what Slack refuses.

It checks the bot token, validates blocks and views with ``slack_sdk.models`` (``invalid_blocks``
like Slack), keeps channels, threads and views, enforces trigger ids and serves response URLs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from bot.sandbox.installs import ExpiringTokens, InstallGrants, access_answer
from bot.sandbox.misbehaviour import HOLD_LIMIT, Dropped, Misbehaviour, Misbehaviours
from bot.sandbox.socket_mode import SocketModeRelay
from bot.sandbox.state import RESPONSE_URL_USES, Ephemeral, Message, SandboxState, View
from bot.sandbox.transport import ApiHandler
from bot.sandbox.validation import SlackApiError, validate_blocks, validate_view

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
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
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

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        team = self.caller_team()
        return {
            "user_id": self.bot_users[team],
            "team_id": team,
            "bot_id": f"B0BOT{team.removeprefix('T')}",
            "user": "approval-bot",
            "team": f"Sandbox {team}",
            "url": self.base_url,
        }

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, text = args.get("channel"), args.get("text") or ""
        team = self.caller_team()
        if not channel or self.state.channel_teams.get(channel, team) != team:
            raise SlackApiError("channel_not_found")  # (Slack's answer to another workspace)
        blocks = validate_blocks(args["blocks"]) if args.get("blocks") else []
        if not text and not blocks:
            raise SlackApiError("no_text")
        thread_ts = args.get("thread_ts") or None
        if thread_ts and self.state.message(channel, thread_ts) is None:
            raise SlackApiError("thread_not_found")
        metadata = args.get("metadata")
        message = Message(
            channel=channel,
            ts=self.state.next_ts(),
            user=self.bot_users[team],
            text=text,
            blocks=blocks,
            thread_ts=thread_ts,
            metadata=json.loads(metadata) if isinstance(metadata, str) else metadata,
            team_id=team,
        )
        self.state.change(lambda: self.state.messages.append(message))
        return {"channel": channel, "ts": message.ts, "message": {"text": text, "blocks": blocks}}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.state.message(args.get("channel", ""), args.get("ts", ""))
        if message is None:
            raise SlackApiError("message_not_found")
        blocks = validate_blocks(args["blocks"]) if args.get("blocks") else message.blocks

        def apply() -> None:
            message.text = args.get("text") or message.text
            message.blocks = blocks
            message.edits += 1
            message.edited_at.append(time.monotonic())

        self.state.change(apply)
        return {"channel": message.channel, "ts": message.ts}

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """A thread, parent first, in pages; metadata only when asked for (as Slack does)."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        parent = self.state.message(channel, ts)
        if parent is None:
            raise SlackApiError("thread_not_found")
        thread = [parent, *self.state.thread(channel, ts)]
        start = int(args.get("cursor") or 0)
        end = start + max(1, min(int(args.get("limit") or 1000), 1000))
        metadata = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
        return {
            "messages": [m.as_json(metadata=metadata) for m in thread[start:end]],
            "has_more": end < len(thread),
            "response_metadata": {"next_cursor": str(end) if end < len(thread) else ""},
        }

    def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """A channel's top-level messages, newest first, in pages (metadata only if asked)."""
        channel = str(args.get("channel") or "")
        newest_first = list(reversed(self.state.top_level(channel)))
        start = int(args.get("cursor") or 0)
        end = start + max(1, min(int(args.get("limit") or 100), 1000))
        metadata = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
        more = end < len(newest_first)
        return {
            "messages": [m.as_json(metadata=metadata) for m in newest_first[start:end]],
            "has_more": more,
            "response_metadata": {"next_cursor": str(end) if more else ""},
        }

    def _m_conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        """A direct message with one user (a D... channel, the same each time)."""
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if len(users) != 1:
            raise SlackApiError("not_enough_users" if not users else "too_many_users")
        if not self._in_caller_team(users[0]):
            raise SlackApiError("user_not_found")
        channel = self.state.change(lambda: self.state.open_dm(users[0]))
        return {"channel": {"id": channel}}

    def _m_chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(args.get("channel") or ""), str(args.get("message_ts") or "")
        message = self.state.message(channel, ts)
        if message is None:
            raise SlackApiError("message_not_found")
        link = f"{self.base_url}archives/{channel}/p{ts.replace('.', '')}"
        if message.thread_ts:
            link += f"?thread_ts={message.thread_ts}&cid={channel}"
        return {"channel": channel, "permalink": link}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, user = args.get("channel"), args.get("user")
        if not channel or not user:
            raise SlackApiError("channel_not_found" if not channel else "user_not_found")
        blocks = validate_blocks(args["blocks"]) if args.get("blocks") else []
        item = Ephemeral(channel=channel, user=user, text=args.get("text") or "", blocks=blocks)
        self.state.change(lambda: self.state.ephemerals.append(item))
        return {"message_ts": self.state.next_ts()}

    def _open_view(self, args: dict[str, Any]) -> dict[str, Any]:
        error, user = self.state.use_trigger(str(args.get("trigger_id", "")))
        if error:
            raise SlackApiError(error)
        view = validate_view(args.get("view"))
        record = View(id=f"V{self.state.next_id():08d}", user=user, view=view)
        self.state.change(lambda: self.state.views.__setitem__(record.id, record))
        return {"view": {"id": record.id, **view}}

    _m_views_open = _open_view
    _m_views_push = _open_view

    def _m_views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        record = self.state.views.get(str(args.get("view_id", "")))
        if record is None:
            raise SlackApiError("not_found")
        view = validate_view(args.get("view"))
        self.state.change(lambda: setattr(record, "view", view))
        return {"view": {"id": record.id, **view}}

    def _m_views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        """A user's Home tab: the last one published per user is kept (``state.homes``),
        apart from modals."""
        user = str(args.get("user_id") or "")
        if not self._in_caller_team(user):
            raise SlackApiError("user_not_found")
        view = validate_view(args.get("view"))
        if view.get("type") != "home":
            raise SlackApiError("invalid_arguments")
        self.state.change(lambda: self.state.publish_home(user, view))
        return {"view": {"id": f"VH{user}", **view}}

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = str(args.get("user", ""))
        if user not in self.state.users:
            raise SlackApiError("user_not_found")
        name = self.state.users[user]
        team = self.state.team_of(user)
        return {"user": {"id": user, "name": name, "real_name": name, "team_id": team}}

    def _in_caller_team(self, user: str) -> bool:
        """A workspace's token reaches its own people only."""
        return user in self.state.users and self.state.team_of(user) == self.caller_team()

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = str(args.get("usergroup", ""))
        if self.plan_gated:
            raise SlackApiError("plan_upgrade_required")
        if group not in self.state.usergroups:
            raise SlackApiError("no_such_subteam")
        return {"users": list(self.state.usergroups[group])}

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
