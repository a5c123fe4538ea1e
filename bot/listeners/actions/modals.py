"""Buttons that open a modal: Reject, Edit, Respond, View full arguments.

The trigger id lives 3 seconds, so only a quick read-only check comes before ``views.open``.
Each listener acks, then hands the rest to ``BotServices.after_ack``: a slow ``views.open``
keeps no other click from its ack.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, BoltContext
from slack_sdk import WebClient

from agent_runtime.authorization import Refusal
from agent_runtime.views import ActionView, ApprovalView
from bot.blocks.arguments import full_argument_pages
from bot.blocks.edit_modal import edit_modal
from bot.blocks.modals import arguments_modal, reject_modal, respond_modal
from bot.errors import user_message
from bot.ids import choice_value, parse_choice
from bot.listeners.actions.decide import decide, tell
from bot.listeners.payloads import Click, payload_of
from bot.services import BotServices, services_of


def _target(services: BotServices, action_id: str) -> tuple[ApprovalView | None, ActionView | None]:
    approval = services.engine.approval_of_action(action_id[:64])
    action = next((a for a in approval.actions if a.id == action_id), None) if approval else None
    return approval, action


def _open_for_decision(ack: Ack, context: BoltContext, client: WebClient, *, decision: str) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.metrics.inc("clicks")
    action_id, _seen = parse_choice(click.action.value)
    drop = click.drop(action_id=action_id)
    services.after_ack(drop, _decision_form, services, client, click, decision=decision)


def _decision_form(
    services: BotServices, client: WebClient, click: Click, *, decision: str
) -> None:
    """The form of a Reject, Edit or Respond, or the refusal of the click, explained."""
    action_id, seen = parse_choice(click.action.value)
    actor, channel = click.actor, click.channel_id
    refusal: Refusal | None = services.engine.check(
        action_id=action_id, actor=actor, decision=decision, seen_hash=seen
    )
    _approval, target = _target(services, action_id) if refusal is None else (None, None)
    form = services.engine.edit_form(action_id) if decision == "edit" and target else None
    if refusal is not None or target is None or (decision == "edit" and form is None):
        # The engine records the refused attempt and explains it (what changed, if stale).
        services.run_later(
            click.drop(action_id=action_id),
            decide,
            services,
            action_id,
            seen,
            actor,
            channel,
            decision=decision,
        )
        return
    assert seen is not None  # ``check`` refused a click without a version
    choice = choice_value(action_id, seen)  # the version clicked, not the one read since
    if decision == "reject":
        view = reject_modal(action_id=choice, tool_name=target.tool_name)
    elif decision == "respond":
        question = str(target.args.get("question") or target.description or "")
        view = respond_modal(action_id=choice, tool_name=target.tool_name, question=question)
    else:
        assert form is not None
        schema, current = form
        view = edit_modal(
            action_id=choice, tool_name=target.tool_name, schema=schema, current=current
        )
    try:
        _show(client, click, view)
    except Exception as exc:
        text = user_message(exc)
        services.run_later(
            click.drop(action_id=action_id), tell, services, channel, actor, text=text
        )


def _show(client: WebClient, click: Click, view: dict[str, Any]) -> None:
    """From inside the review modal, stack on top of it; else open a new modal."""
    if click.view is not None:
        client.views_push(trigger_id=click.trigger_id, view=view)
    else:
        client.views_open(trigger_id=click.trigger_id, view=view)


def on_reject(ack: Ack, context: BoltContext, client: WebClient) -> None:
    _open_for_decision(ack, context, client, decision="reject")


def on_edit(ack: Ack, context: BoltContext, client: WebClient) -> None:
    _open_for_decision(ack, context, client, decision="edit")


def on_respond(ack: Ack, context: BoltContext, client: WebClient) -> None:
    _open_for_decision(ack, context, client, decision="respond")


def _pages(target: ActionView) -> list[list[dict[str, Any]]]:
    preview = (target.extra or {}).get("preview")
    args = target.edited_args if target.edited_args is not None else target.args
    return full_argument_pages(tool_name=target.tool_name, args=args, preview=preview)


def on_view_args(ack: Ack, context: BoltContext, client: WebClient) -> None:
    """Anyone who sees the card may read the whole of it; nothing is decided here."""
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.after_ack(click.drop(), _arguments, services, client, click)


def _arguments(services: BotServices, client: WebClient, click: Click) -> None:
    approval, target = _target(services, click.action.value)
    if (
        target is None
        or approval is None
        or click.channel_id not in (None, *approval.card_channels)
    ):
        services.run_later(
            click.drop(),
            tell,
            services,
            click.channel_id,
            click.actor,
            text="Nothing to show.",
        )
        return
    _show(client, click, arguments_modal(action_id=target.id, pages=_pages(target), page=0))


def on_view_args_page(ack: Ack, context: BoltContext, client: WebClient) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    services.after_ack(click.drop(), _arguments_page, services, client, click)


def _arguments_page(services: BotServices, client: WebClient, click: Click) -> None:
    action_id, _, page = click.action.value.partition(":")
    _approval, target = _target(services, action_id)
    view_id = click.view.id if click.view else None
    if target is None or not view_id or not (page.isascii() and page.isdigit()):
        return
    view = arguments_modal(action_id=target.id, pages=_pages(target), page=int(page))
    client.views_update(view_id=view_id, view=view)
