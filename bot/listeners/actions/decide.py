"""Approve, Approve all, and the decision work they hand to our worker pool."""

from __future__ import annotations

import uuid
from typing import Any

from slack_bolt import Ack, BoltContext

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.notifier import MessageRef
from agent_runtime.views import versions_digest
from bot.blocks.approval_card import shown_on_card
from bot.blocks.notices import stale_notice
from bot.errors import refusal_text
from bot.ids import ActionId, parse_choice
from bot.listeners.actions.review import refresh_review
from bot.listeners.payloads import Click, payload_of
from bot.services import BotServices, services_of


def on_approve(ack: Ack, context: BoltContext) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    action_id, seen = parse_choice(click.action.value)
    services.run_later(
        click.drop(action_id=action_id), decide_and_refresh, services, action_id, seen, click
    )


def on_approve_all(ack: Ack, context: BoltContext) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    request_id, digest = parse_choice(click.action.value)
    services.run_later(
        click.drop(request_id=request_id),
        approve_all,
        services,
        request_id,
        digest,
        click.actor,
        click.channel_id,
        card=click.card,
    )


def decide_and_refresh(
    services: BotServices, action_id: str, seen: str | None, click: Click
) -> None:
    """An Approve from the card or from the review modal; the modal is redrawn afterwards."""
    decide(services, action_id, seen, click.actor, click.channel_id, card=click.card)
    refresh_review(services, click)


def decide(
    services: BotServices,
    action_id: str,
    seen: str | None,
    actor: Actor,
    channel: str | None,
    *,
    decision: str = "approve",
    message: str | None = None,
    edited_args: dict[str, Any] | None = None,
    card: MessageRef | None = None,
) -> None:
    """Record the decision on the version the reviewer saw (the engine resumes if it was the
    last one needed), or explain the refusal, showing what changed if the card moved on.
    ``card``: the message clicked, which the engine adopts if it has no card reference yet."""
    result = services.engine.decide(
        action_id=action_id[:64],
        actor=actor,
        decision=decision,
        seen_hash=seen,
        message=message,
        edited_args=edited_args,
        card=card,
    )
    if result.refusal is None:
        services.metrics.inc("decisions_recorded")
        return
    services.metrics.inc("decisions_refused")
    current = result.current
    if channel is None and current is not None:
        channel = current.card_channel
    target = next((a for a in current.actions if a.id == action_id), None) if current else None
    if result.refusal is Refusal.STALE_VERSION and target is not None and seen is not None:
        tell(services, channel, actor.user_id, **stale_notice(target, seen=seen))
        return
    tell(services, channel, actor.user_id, text=refusal_text(result.refusal))


def approve_all(
    services: BotServices,
    request_id: str,
    digest: str | None,
    actor: Actor,
    channel: str | None,
    *,
    card: MessageRef | None = None,
) -> None:
    """Approve the actions the card showed, at the versions it showed, if the reviewer may;
    a card that changed since is refused whole. Each refused attempt is audited: as a whole
    here, action by action by the engine, every row naming this one attempt."""
    via = {"via": ActionId.APPROVE_ALL, "attempt": uuid.uuid4().hex}
    approval = services.engine.approval(request_id)
    approvable = approval.approvable if approval is not None else ()
    unseen = {a.id for a in approvable} - shown_on_card(approval) if approval else set()
    refusal: Refusal | None = None
    if approval is None:
        refusal = Refusal.UNKNOWN_APPROVAL
    elif unseen or digest != versions_digest(approvable):
        refusal = Refusal.STALE_VERSION
    if refusal is not None:
        _refuse_all(services, request_id, actor, refusal, via=via)
        tell(services, channel, actor.user_id, text=refusal_text(refusal))
        return
    approved, refusals = 0, list[Refusal]()
    for action in approvable:
        result = services.engine.decide(
            action_id=action.id,
            actor=actor,
            decision="approve",
            seen_hash=action.action_hash,
            card=card,
            via=via,
        )
        if result.refusal is None:
            approved += 1
        else:
            refusals.append(result.refusal)
    services.metrics.inc("decisions_recorded", approved)
    if not approved:
        first = refusals[0] if refusals else Refusal.ALREADY_DECIDED
        _refuse_all(services, request_id, actor, first, via=via)
    if refusals or not approved:
        tell(
            services,
            channel,
            actor.user_id,
            text=f"You approved {approved} action(s); {len(refusals)} need another reviewer or "
            "were already decided.",
        )


def _refuse_all(
    services: BotServices,
    request_id: str,
    actor: Actor,
    refusal: Refusal,
    *,
    via: dict[str, str],
) -> None:
    services.metrics.inc("decisions_refused")
    services.engine.record_refusal(
        request_id=request_id, actor=actor, refusal=refusal, decision="approve_all", via=via
    )


def tell(
    services: BotServices,
    channel: str | None,
    user_id: str,
    *,
    text: str,
    blocks: list[dict[str, Any]] | None = None,
) -> None:
    if channel and user_id:
        services.client.chat_postEphemeral(
            channel=channel, user=user_id, text=text, blocks=blocks or None
        )
