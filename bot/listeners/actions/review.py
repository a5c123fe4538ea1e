"""The "Review all actions" modal: open it, page through it, redraw it after a decision."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, BoltContext
from slack_sdk import WebClient

from bot.blocks.review_modal import review_modal
from bot.ids import CallbackId
from bot.services import BotServices, actor_from, services_of

logger = logging.getLogger(__name__)


def _in_channel(services: BotServices, approval_id: str, body: dict[str, Any]) -> bool:
    """Anyone who sees the card may read it; a click from elsewhere sees nothing."""
    approval = services.engine.approval(approval_id)
    if approval is None:
        return False
    channel = (body.get("container") or {}).get("channel_id") or (body.get("channel") or {}).get(
        "id"
    )
    return channel in (None, approval.run.channel_id)


def on_review_all(
    ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext, client: WebClient
) -> None:
    ack()
    services = services_of(context)
    approval_id = str(action.get("value", ""))[:64]
    approval = services.engine.approval(approval_id)
    if approval is None or not _in_channel(services, approval_id, body):
        return
    client.views_open(trigger_id=body.get("trigger_id", ""), view=review_modal(approval, page=0))


def on_review_page(
    ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext, client: WebClient
) -> None:
    ack()
    services = services_of(context)
    approval_id, _, page = str(action.get("value", "")).partition(":")
    view_id = (body.get("view") or {}).get("id")
    approval = services.engine.approval(approval_id[:64])
    if approval is None or not view_id or not page.isdigit():
        return
    client.views_update(view_id=view_id, view=review_modal(approval, page=int(page)))


def refresh_review(services: BotServices, body: dict[str, Any]) -> None:
    """After a decision taken inside the review modal, redraw its page with the new state."""
    view = body.get("view") or {}
    if view.get("callback_id") != CallbackId.REVIEW_MODAL or not view.get("id"):
        return
    approval_id, _, page = str(view.get("private_metadata", "")).partition(":")
    approval = services.engine.approval(approval_id[:64])
    if approval is None:
        return
    try:
        services.client.views_update(
            view_id=view["id"], view=review_modal(approval, page=int(page) if page.isdigit() else 0)
        )
    except Exception:
        logger.exception("could not redraw the review modal for %s", actor_from(body).user_id)
