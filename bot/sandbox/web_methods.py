"""The sandbox's Web API methods, one per Slack method the bot calls (``chat.postMessage`` is
``_m_chat_postMessage``), kept apart from the server's authentication, call records and
misbehaviours so each reads on its own."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from bot.sandbox.state import Ephemeral, Message, SandboxState, View
from bot.sandbox.validation import SlackApiError, validate_blocks, validate_view

Method = Callable[[dict[str, Any]], dict[str, Any]]


class Workspaces(Protocol):
    """What the methods read of the sandbox (live: tests change e.g. ``plan_gated``)."""

    state: SandboxState
    bot_users: dict[str, str]
    plan_gated: bool

    @property
    def base_url(self) -> str: ...

    def caller_team(self) -> str: ...


class WebMethods:
    """Slack's answers to the methods, given the call is already authenticated and recorded."""

    def __init__(self, slack: Workspaces) -> None:
        self.slack = slack

    @property
    def state(self) -> SandboxState:
        return self.slack.state

    def handler(self, method: str) -> Method | None:
        """The method's handler (``chat.postMessage`` -> ``_m_chat_postMessage``), if any."""
        handler: Method | None = getattr(self, "_m_" + method.replace(".", "_"), None)
        return handler

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        team = self.slack.caller_team()
        return {
            "user_id": self.slack.bot_users[team],
            "team_id": team,
            "bot_id": f"B0BOT{team.removeprefix('T')}",
            "user": "approval-bot",
            "team": f"Sandbox {team}",
            "url": self.slack.base_url,
        }

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, text = args.get("channel"), args.get("text") or ""
        team = self.slack.caller_team()
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
            user=self.slack.bot_users[team],
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
        link = f"{self.slack.base_url}archives/{channel}/p{ts.replace('.', '')}"
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
        return user in self.state.users and self.state.team_of(user) == self.slack.caller_team()

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = str(args.get("usergroup", ""))
        if self.slack.plan_gated:
            raise SlackApiError("plan_upgrade_required")
        if group not in self.state.usergroups:
            raise SlackApiError("no_such_subteam")
        return {"users": list(self.state.usergroups[group])}
