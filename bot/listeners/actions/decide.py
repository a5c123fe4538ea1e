"""Approve, Approve all, and the decision work they hand to our worker pool."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, BoltContext

from agent_runtime.authorization import Actor
from bot.errors import refusal_text
from bot.services import BotServices, actor_from, services_of


def channel_of(body: dict[str, Any]) -> str | None:
    return (body.get("container") or {}).get("channel_id") or (body.get("channel") or {}).get("id")


def on_approve(
    ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
) -> None:
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    services.run_later(
        decide, services, str(action.get("value", "")), actor_from(body), channel_of(body)
    )


def on_approve_all(
    ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
) -> None:
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    services.run_later(
        approve_all, services, str(action.get("value", ""))[:64], actor_from(body), channel_of(body)
    )


def decide(
    services: BotServices,
    action_id: str,
    actor: Actor,
    channel: str | None,
    *,
    decision: str = "approve",
    message: str | None = None,
    edited_args: dict[str, Any] | None = None,
) -> None:
    """Record the decision (the engine resumes if it was the last one) or explain the refusal."""
    result = services.engine.decide(
        action_id=action_id[:64],
        actor=actor,
        decision=decision,
        message=message,
        edited_args=edited_args,
    )
    if result.refusal is None:
        services.metrics.inc("decisions_recorded")
        return
    services.metrics.inc("decisions_refused")
    if channel is None:
        approval = services.engine.approval_of_action(action_id[:64])
        channel = approval.card_channel if approval else None
    tell(services, channel, actor.user_id, refusal_text(result.refusal))


def approve_all(services: BotServices, request_id: str, actor: Actor, channel: str | None) -> None:
    """Approve every open action this reviewer may approve; say what was left to others."""
    approval = services.engine.approval(request_id)
    if approval is None:
        tell(services, channel, actor.user_id, "I can't find that approval.")
        return
    approved, skipped = 0, 0
    for action in approval.actions:
        if action.outcome is not None or "approve" not in action.allowed_decisions:
            continue
        if services.engine.check(action_id=action.id, actor=actor, decision="approve"):
            skipped += 1
            continue
        result = services.engine.decide(action_id=action.id, actor=actor, decision="approve")
        approved += result.refusal is None
        skipped += result.refusal is not None
    services.metrics.inc("decisions_recorded", approved)
    if skipped or not approved:
        tell(
            services,
            channel,
            actor.user_id,
            f"You approved {approved} action(s); {skipped} need another reviewer or were "
            "already decided.",
        )


def tell(services: BotServices, channel: str | None, user_id: str, text: str) -> None:
    if channel and user_id:
        services.client.chat_postEphemeral(channel=channel, user=user_id, text=text)
