"""Approve and Reject buttons on approval cards. Button values are opaque action ids only."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from agent_runtime.authorization import Actor, Refusal
from bot.blocks.modals import reject_modal
from bot.errors import refusal_text, user_message
from bot.ids import ActionId
from bot.services import BotServices, actor_from, services_of


def register(app: App) -> None:
    app.action(ActionId.APPROVE)(on_approve)
    app.action(ActionId.REJECT)(on_reject)


def _channel_of(body: dict[str, Any]) -> str | None:
    return (body.get("container") or {}).get("channel_id") or (body.get("channel") or {}).get("id")


def on_approve(
    ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
) -> None:
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    services.run_later(
        decide, services, str(action.get("value", "")), actor_from(body), _channel_of(body)
    )


def on_reject(
    ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext, client: WebClient
) -> None:
    """Ask for the reason in a modal; the trigger id lives 3 s: only a quick check comes first."""
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    action_id, actor, channel = str(action.get("value", "")), actor_from(body), _channel_of(body)
    refusal = _quick_check(services, action_id, actor)
    approval = services.engine.approval_of_action(action_id) if refusal is None else None
    target = next((a for a in approval.actions if a.id == action_id), None) if approval else None
    if refusal is not None or target is None:
        services.run_later(decide, services, action_id, actor, channel, decision="reject")
        return
    try:
        client.views_open(
            trigger_id=body.get("trigger_id", ""),
            view=reject_modal(action_id=action_id, tool_name=target.tool_name),
        )
    except Exception as exc:
        services.run_later(tell, services, channel, actor.user_id, user_message(exc))


def _quick_check(services: BotServices, action_id: str, actor: Actor) -> Refusal | None:
    return services.engine.check(action_id=action_id[:64], actor=actor, decision="reject")


def decide(
    services: BotServices,
    action_id: str,
    actor: Actor,
    channel: str | None,
    *,
    decision: str = "approve",
    message: str | None = None,
) -> None:
    """Record the decision (the engine resumes if it was the last one) or explain the refusal."""
    result = services.engine.decide(
        action_id=action_id[:64], actor=actor, decision=decision, message=message
    )
    if result.refusal is None:
        services.metrics.inc("decisions_recorded")
        return
    services.metrics.inc("decisions_refused")
    if channel is None:
        approval = services.engine.approval_of_action(action_id)
        channel = approval.card_channel if approval else None
    tell(services, channel, actor.user_id, refusal_text(result.refusal))


def tell(services: BotServices, channel: str | None, user_id: str, text: str) -> None:
    if channel and user_id:
        services.client.chat_postEphemeral(channel=channel, user=user_id, text=text)
