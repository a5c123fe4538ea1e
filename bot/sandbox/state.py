"""What the local Slack sandbox remembers: users, channels, threads, ephemerals, views, triggers."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

TRIGGER_TTL = 3.0
RESPONSE_URL_USES = 5


@dataclass
class Message:
    channel: str
    ts: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    metadata: dict[str, Any] | None = None
    team_id: str | None = None
    """The workspace whose bot token posted it."""
    edits: int = 0
    posted_at: float = field(default_factory=time.monotonic)
    edited_at: list[float] = field(default_factory=list)

    def as_json(self, *, metadata: bool) -> dict[str, Any]:
        """As the Web API returns it (``conversations.replies``); metadata only if asked for."""
        data: dict[str, Any] = {
            "type": "message",
            "ts": self.ts,
            "user": self.user,
            "text": self.text,
            "blocks": self.blocks,
        }
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        if metadata and self.metadata:
            data["metadata"] = self.metadata
        return data


@dataclass
class Ephemeral:
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]]


@dataclass
class View:
    id: str
    user: str
    view: dict[str, Any]
    open: bool = True


@dataclass
class SandboxState:
    """Thread-safe; every change wakes those waiting in ``wait_for``."""

    team_id: str = "T0SANDBOX"
    bot_user_id: str = "U0BOT"
    users: dict[str, str] = field(default_factory=dict)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    ephemerals: list[Ephemeral] = field(default_factory=list)
    views: dict[str, View] = field(default_factory=dict)
    responses: list[dict[str, Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    calls_by_team: list[tuple[str, str]] = field(default_factory=list)
    """(method, team whose token made the call), in order."""
    user_teams: dict[str, str] = field(default_factory=dict)
    """User id -> the workspace they belong to (absent: the first workspace)."""
    channel_teams: dict[str, str] = field(default_factory=dict)
    """Channel id -> the workspace it belongs to; only its token posts there, as in Slack
    (absent: any token may post there)."""
    triggers: dict[str, tuple[str, float]] = field(default_factory=dict)
    response_urls: dict[str, int] = field(default_factory=dict)
    dms: dict[str, str] = field(default_factory=dict)
    """User id -> the id of the bot's direct message channel with them."""
    homes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The last Home tab view published for each user."""
    home_publishes: dict[str, int] = field(default_factory=dict)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def team_of(self, user: str) -> str:
        return self.user_teams.get(user, self.team_id)

    def next_id(self) -> int:
        return next(self._ids)

    def next_ts(self) -> str:
        return f"{1_800_000_000 + self.next_id()}.{self.next_id():06d}"

    def change(self, fn: Callable[[], T]) -> T:
        with self._cond:
            result = fn()
            self._cond.notify_all()
            return result

    def wait_for(self, predicate: Callable[[], T | None], timeout: float = 15.0) -> T:
        """Wait until ``predicate`` returns something truthy; raise if it never does."""
        with self._cond:
            result = self._cond.wait_for(predicate, timeout=timeout)
        if not result:
            raise TimeoutError("the sandbox never reached the expected state")
        return result

    def issue_trigger(self, user: str) -> str:
        trigger = f"{self.next_id()}.{int(time.time())}.sandbox"
        self.change(lambda: self.triggers.__setitem__(trigger, (user, time.monotonic())))
        return trigger

    def use_trigger(self, trigger: str) -> tuple[str | None, str]:
        """Slack's rule: a trigger works once, within 3 seconds. Returns (error, user)."""
        with self._cond:
            issued = self.triggers.pop(trigger, None)
        if issued is None:
            return "invalid_trigger_id", ""
        if time.monotonic() - issued[1] > TRIGGER_TTL:
            return "expired_trigger_id", issued[0]
        return None, issued[0]

    def open_dm(self, user: str) -> str:
        """Call inside ``change``: the direct message channel with ``user``, made once."""
        return self.dms.setdefault(user, f"D{user.removeprefix('U')}")

    def publish_home(self, user: str, view: dict[str, Any]) -> None:
        """Call within ``change``."""
        self.homes[user] = view
        self.home_publishes[user] = self.home_publishes.get(user, 0) + 1

    # Queries used by tests and the demo --------------------------------------------------

    def home_of(self, user: str) -> dict[str, Any] | None:
        with self._cond:
            return self.homes.get(user)

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        with self._cond:
            return [m for m in self.messages if m.channel == channel and m.thread_ts == thread_ts]

    def top_level(self, channel: str) -> list[Message]:
        with self._cond:
            return [m for m in self.messages if m.channel == channel and m.thread_ts is None]

    def message(self, channel: str, ts: str) -> Message | None:
        with self._cond:
            return next((m for m in self.messages if m.channel == channel and m.ts == ts), None)

    def current(self, message: Message) -> Message:
        """The latest version of a message the bot may have updated since it was read."""
        latest = self.message(message.channel, message.ts)
        if latest is None:
            raise KeyError(f"message {message.ts} is gone from {message.channel}")
        return latest

    def dm_with(self, user: str) -> list[Message]:
        """What the bot sent ``user`` in a direct message."""
        with self._cond:
            channel = self.dms.get(user)
            return [m for m in self.messages if channel and m.channel == channel]

    def ephemerals_for(self, user: str) -> list[Ephemeral]:
        with self._cond:
            return [e for e in self.ephemerals if e.user == user]

    def open_views(self, user: str) -> list[View]:
        with self._cond:
            return [v for v in self.views.values() if v.user == user and v.open]
