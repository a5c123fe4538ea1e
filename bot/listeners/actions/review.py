"""The "Review all actions" modal: open it, page through it, redraw it after a decision."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from slack_bolt import Ack, BoltContext
from slack_sdk import WebClient

from agent_runtime.authorization import Actor
from bot.blocks.review_modal import review_modal
from bot.ids import CallbackId
from bot.listeners.payloads import Click, payload_of
from bot.services import BotServices, services_of
from bot.work import OpenView

logger = logging.getLogger(__name__)


@dataclass
class _OpenView:
    lock: threading.Lock = field(default_factory=threading.Lock)
    page: int | None = None
    """The page the reviewer last turned to (a redraw after a decision keeps it)."""


class _OpenViews:
    """Per open review modal: a lock, so redraws after concurrent decisions and page turns
    take turns and the last one reads the newest state; and the page it shows."""

    def __init__(self, size: int = 512) -> None:
        self._views: OrderedDict[str, _OpenView] = OrderedDict()
        self._guard = threading.Lock()
        self._size = size

    def __call__(self, view_id: str) -> _OpenView:
        with self._guard:
            entry = self._views.pop(view_id, None) or _OpenView()
            self._views[view_id] = entry
            while len(self._views) > self._size:
                self._views.popitem(last=False)
            return entry


_open_views = _OpenViews()


def _in_channel(services: BotServices, approval_id: str, click: Click) -> bool:
    """Anyone who sees the card may read it; a click from elsewhere sees nothing."""
    approval = services.engine.approval(approval_id)
    if approval is None:
        return False
    return click.channel_id in (None, *approval.card_channels)


def on_review_all(ack: Ack, context: BoltContext, client: WebClient) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.after_ack(click.drop(), _open_review, services, client, click)


def _open_review(services: BotServices, client: WebClient, click: Click) -> None:
    approval_id = click.action.value[:64]
    approval = services.engine.approval(approval_id)
    if approval is None or not _in_channel(services, approval_id, click):
        return
    client.views_open(trigger_id=click.trigger_id, view=review_modal(approval, page=0))


def on_review_page(ack: Ack, context: BoltContext, client: WebClient) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.after_ack(click.drop(), _turn_review_page, services, client, click)


def _turn_review_page(services: BotServices, client: WebClient, click: Click) -> None:
    approval_id, _, page = click.action.value.partition(":")
    view_id = click.view.id if click.view else None
    if not view_id or not (page.isascii() and page.isdigit()):
        return
    entry = _open_views(view_id)
    with entry.lock:
        approval = services.engine.approval(approval_id[:64])
        if approval is None:
            return
        entry.page = int(page)
        client.views_update(view_id=view_id, view=review_modal(approval, page=entry.page))


def refresh_review(services: BotServices, view: OpenView | None, *, actor: Actor) -> None:
    """After a decision taken inside the review modal, redraw its page with the new state."""
    if view is None or view.callback_id != CallbackId.REVIEW_MODAL or not view.id:
        return
    approval_id, _, page = view.private_metadata.partition(":")
    entry = _open_views(view.id)
    with entry.lock:
        number = entry.page if entry.page is not None else _page(page)
        approval = services.engine.approval(approval_id[:64])  # read inside the turn
        if approval is None:
            return
        try:
            services.slack(actor.team_id).views_update(
                view_id=view.id, view=review_modal(approval, page=number)
            )
        except Exception:
            logger.exception("could not redraw the review modal for %s", actor.user_id)


def _page(text: str) -> int:
    return int(text) if text.isascii() and text.isdigit() else 0
