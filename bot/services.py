"""What listeners need, handed to them through Bolt's context by one middleware."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt import BoltContext
from slack_sdk import WebClient

from agent_runtime.authorization import Actor
from agent_runtime.engine import ApprovalEngine
from agent_runtime.notifier import MessageRef
from bot.directory import UsergroupDirectory
from bot.errors import BUSY
from bot.executor import BoundedExecutor


@dataclass
class Metrics:
    """Counters for ``GET /metrics`` (Prometheus text format)."""

    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def inc(self, name: str, amount: int = 1) -> None:
        with self.lock:
            self.counts[name] += amount

    def render(self, gauges: dict[str, float]) -> str:
        with self.lock:
            items = sorted(self.counts.items())
        lines = [f"approval_bot_{name}_total {value}" for name, value in items]
        lines += [f"approval_bot_{name} {value}" for name, value in sorted(gauges.items())]
        return "\n".join(lines) + "\n"


@dataclass
class BotServices:
    engine: ApprovalEngine
    executor: BoundedExecutor
    client: WebClient
    metrics: Metrics = field(default_factory=Metrics)
    directory: UsergroupDirectory | None = None

    def run_later(
        self,
        fn: Callable[..., Any],
        *args: Any,
        tell: Callable[[str], Any] | None = None,
        **kwargs: Any,
    ) -> bool:
        """Hand slow work to our pool; if it is full, tell the user instead of dropping silently."""
        if self.executor.submit(fn, *args, **kwargs) is not None:
            return True
        self.metrics.inc("busy_refusals")
        if tell is not None:
            tell(BUSY)
        return False


def services_of(context: BoltContext) -> BotServices:
    return context["approval_services"]


def actor_from(body: dict[str, Any]) -> Actor:
    """Identity is user id + team id (+ enterprise id), never a name."""
    user = body.get("user") or {}
    team = user.get("team_id") or (body.get("team") or {}).get("id")
    enterprise = (body.get("enterprise") or {}).get("id")
    return Actor(user_id=str(user.get("id", "")), team_id=team, enterprise_id=enterprise)


def channel_of(body: dict[str, Any]) -> str | None:
    """The channel a click came from, whatever shape a hostile payload gives these fields."""
    container, channel = body.get("container"), body.get("channel")
    found = (container.get("channel_id") if isinstance(container, dict) else None) or (
        channel.get("id") if isinstance(channel, dict) else None
    )
    return str(found) if found else None


def card_of(body: dict[str, Any]) -> MessageRef | None:
    """The message a button was clicked on (Slack signs it with the payload), or None for
    clicks from a modal, an ephemeral or a payload of another shape."""
    container = body.get("container")
    if not isinstance(container, dict) or container.get("type") != "message":
        return None
    channel, ts = container.get("channel_id"), container.get("message_ts")
    if container.get("is_ephemeral") or not isinstance(channel, str) or not isinstance(ts, str):
        return None
    return MessageRef(channel=channel, ts=ts) if channel and ts else None


def install(app: Any, services: BotServices) -> None:
    def inject(context: BoltContext, next: Callable[[], None]) -> None:
        context["approval_services"] = services
        next()

    app.use(inject)
