"""Approve on a digest row: stored in the decision inbox before the ack, like a card's Approve,
and decided by the same worker path (authorization, separation of duties, the version shown,
audit). Reject on a digest row is the card's Reject (it asks for a reason in a modal)."""

from __future__ import annotations

from slack_bolt import Ack, BoltContext

from bot.ids import parse_choice
from bot.listeners.actions.decide import click_work, store_then_ack
from bot.listeners.payloads import Click, payload_of
from bot.services import services_of
from store.inbox_models import InboxKind


def on_digest_approve(ack: Ack, context: BoltContext) -> None:
    """The digest message is not the request's card: no message reference goes with the
    work, so the engine never adopts a digest as a card (it redraws the digest itself)."""
    click = payload_of(context, Click)
    services = services_of(context)
    services.metrics.inc("clicks")
    action_id, seen = parse_choice(click.action.value)
    work = click_work(click, action_id=action_id, seen=seen).model_copy(update={"card": None})
    store_then_ack(ack, services, InboxKind.APPROVE, work)
