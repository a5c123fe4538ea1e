"""What listeners need, handed to them through Bolt's context by one middleware."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.middleware import Middleware
from slack_sdk import WebClient

from agent_runtime.authorization import Actor
from agent_runtime.engine import ApprovalEngine
from agent_runtime.kill_switch import KillSwitch
from bot.ack_first import AckFirst
from bot.directory import UsergroupDirectory
from bot.doorbell import Doorbell
from bot.errors import BUSY_CLICK, user_message
from bot.executor import BoundedExecutor, ListenerPool
from bot.handoff import Handoff
from bot.inbox_writer import InboxWriter
from bot.metrics import Metrics
from bot.workspaces import Workspaces
from store.inbox_models import InboxKind

if TYPE_CHECKING:
    from bot.home import HomeTab

logger = logging.getLogger(__name__)
SERVICES = "approval_services"


@dataclass(frozen=True)
class Drop:
    """A click, submission or command we could not take (our pool was full, or the decision
    inbox could not store it): who, what (the Slack id of the button, modal or command), which
    action or request it named, and how to tell the user."""

    actor: Actor
    what: str
    channel: str | None = None
    action_id: str | None = None
    request_id: str | None = None
    run_id: str | None = None
    reply: Callable[[str], Any] | None = None
    """Tells the user (e.g. a slash command's ``respond``); else an ephemeral in ``channel``."""
    notice: str = BUSY_CLICK
    reason: str = "busy"
    """Why it was dropped, for the audit row."""


NOTICE_WORKERS = 2
NOTICE_QUEUE = 256
NOTICE_TIMEOUT = 3
"""Seconds a busy or error notice may take; it is not retried (the user can click again)."""


def _notices() -> BoundedExecutor:
    return BoundedExecutor(workers=NOTICE_WORKERS, queue=NOTICE_QUEUE, name="approval-notice")


@dataclass
class BotServices:
    engine: ApprovalEngine
    executor: BoundedExecutor
    workspaces: Workspaces
    """The Slack client of each workspace (one client for all, with one bot token)."""
    writer: InboxWriter
    """Stores clicks before their ack, several in one transaction under a burst."""
    switch: KillSwitch
    """The admins' pause of all gated execution (``/approvals pause``)."""
    metrics: Metrics = field(default_factory=Metrics)
    directory: UsergroupDirectory | None = None
    notices: BoundedExecutor = field(default_factory=_notices)
    """Drop audits and notices: off the threads that ack Slack, and never in the way of
    decisions (a full worker pool is when they are needed)."""
    doorbell: Doorbell = field(default_factory=Doorbell)
    """Rung when this process stores an inbox item, so one of its workers looks at once."""
    handoff: Handoff = field(default_factory=Handoff)
    """Idle inbox workers of this process, to which the writer hands items stored claimed;
    the writer must be given the same one."""
    home: HomeTab | None = None
    """Publishes and refreshes users' Home tabs."""
    ack_first: AckFirst = field(default_factory=AckFirst)
    """Requests being answered, for which the inbox workers hold back on a burst."""
    after_acks: ListenerPool = field(default_factory=lambda: ListenerPool(name="after-ack"))
    """What listeners hand over after their ack (``after_ack``)."""

    def slack(self, team_id: str | None) -> WebClient:
        """The client of that workspace (raises ``WorkspaceNotInstalled`` if there is none)."""
        return self.workspaces.client(team_id)

    def notice_client(self, team_id: str | None) -> WebClient:
        """No retry handlers: a notice that fails or is slow is logged, not repeated."""
        client = self.slack(team_id)
        return WebClient(
            token=client.token,
            base_url=client.base_url,
            timeout=NOTICE_TIMEOUT,
            retry_handlers=[],
        )

    def store(self, kind: InboxKind, payload: dict[str, Any]) -> bool:
        """Store a decision click or submission in the inbox, in one short transaction, before
        its ack; ``False`` if that failed (the caller answers as if busy: nothing is lost
        silently)."""
        if not self.writer.write(kind, payload):
            self.metrics.inc("inbox_write_failures")
            return False
        self.metrics.inc("inbox_stored")
        self.doorbell.ring()
        return True

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
        """Hand slow work to our pool; ``False`` if it is full (nothing was started)."""
        if self.executor.submit(fn, *args, **kwargs) is not None:
            return True
        self.metrics.inc("busy_refusals")
        return False

    def after_ack(
        self, drop: Drop | None, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> None:
        """A listener's work after its ack, off Bolt's listener threads (whatever it waits
        for, no other click's ack waits with it): what answers its user at once (a modal to
        open while its trigger id lives, a page to turn), or an event's work. An error in it
        reaches the user of ``drop``, if any; it is logged. Never raises."""
        try:
            if drop is None:
                self.after_acks.submit(self._logged, fn, *args, **kwargs)
            else:
                self.after_acks.submit(self._guarded, drop, fn, *args, **kwargs)
        except RuntimeError:  # the pool is shut down: the process is stopping
            self.metrics.inc("busy_refusals")
            logger.warning("stopping: %s not done", getattr(fn, "__name__", fn))

    @staticmethod
    def _logged(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            logger.exception("%s failed", getattr(fn, "__name__", fn))

    def run(self, drop: Drop, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> bool:
        """``submit`` a listener's work so that an error in it reaches its user."""
        return self.submit(self._guarded, drop, fn, *args, **kwargs)

    def run_later(self, drop: Drop, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> bool:
        """``run``, and if the pool is full, audit the drop and tell the user to retry, both
        on the notice pool: the listener's thread does no I/O for a drop."""
        if self.run(drop, fn, *args, **kwargs):
            return True
        self.dropped(drop, tell=True)
        return False

    def dropped(self, drop: Drop, *, tell: bool) -> None:
        """Audit a drop (and tell its user) in the background; if even that pool is full,
        the drop is logged and counted."""
        if self.notices.submit(self._handle_drop, drop, tell) is None:
            self.metrics.inc("drop_notices_lost")
            logger.warning("notice pool full: %s by %s not audited", drop.what, drop.actor.user_id)

    def _handle_drop(self, drop: Drop, tell: bool) -> None:
        self.record_drop(drop)
        if tell:
            self.tell(drop, drop.notice)

    def _guarded(self, drop: Drop, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as exc:
            logger.exception("%s by %s failed", drop.what, drop.actor.user_id)
            self.tell(drop, user_message(exc))

    def record_drop(self, drop: Drop) -> None:
        try:
            self.engine.record_dropped(
                actor=drop.actor,
                what=drop.what,
                action_id=drop.action_id,
                request_id=drop.request_id,
                run_id=drop.run_id,
                reason=drop.reason,
            )
        except Exception:
            logger.exception("could not audit a dropped %s by %s", drop.what, drop.actor.user_id)

    def tell(self, drop: Drop, text: str) -> None:
        """An ephemeral where the user clicked (for a click in a modal: the card's channel),
        once, with a short time limit."""
        try:
            if drop.reply is not None:
                drop.reply(text)
                return
            channel = drop.channel or self._card_channel(drop)
            if channel is None:
                logger.warning("no channel to tell %s: %s", drop.actor.user_id, text)
                return
            self.notice_client(drop.actor.team_id).chat_postEphemeral(
                channel=channel, user=drop.actor.user_id, text=text
            )
        except Exception:
            logger.exception("could not tell %s: %s", drop.actor.user_id, text)

    def _card_channel(self, drop: Drop) -> str | None:
        if drop.action_id:
            approval = self.engine.approval_of_action(drop.action_id)
        else:
            approval = self.engine.approval(drop.request_id) if drop.request_id else None
        if approval is None:
            return None
        # Before its reference is stored, the card is where the policy sends it.
        return approval.card_channel or approval.card_channels[-1]


def services_of(context: BoltContext) -> BotServices:
    services: BotServices = context[SERVICES]
    return services


class _Inject(Middleware):
    """Class-based: it reads nothing from the body, so Bolt builds no arguments from it."""

    def __init__(self, services: BotServices) -> None:
        self.services = services

    def process(
        self, *, req: BoltRequest, resp: BoltResponse, next: Callable[[], Any]
    ) -> BoltResponse | None:
        req.context[SERVICES] = self.services
        next()
        return resp


def install(app: App, services: BotServices) -> None:
    app.use(_Inject(services))
