"""Modal submissions: reject reason, answer, edited arguments. Each is authorized again."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.blocks.edit_modal import field_block_id, parse_edit
from bot.blocks.modals import reject_reason, respond_answer
from bot.ids import BlockId, CallbackId, parse_choice
from bot.listeners.actions.decide import decide
from bot.services import actor_from, services_of


def register(app: App) -> None:
    app.view(CallbackId.REJECT_MODAL)(on_reject_submitted)
    app.view(CallbackId.RESPOND_MODAL)(on_respond_submitted)
    app.view(CallbackId.EDIT_MODAL)(on_edit_submitted)


def _submit_text(
    ack: Ack,
    body: dict[str, Any],
    view: dict[str, Any],
    context: BoltContext,
    *,
    decision: str,
    text: str,
    block_id: str,
    missing: str,
) -> None:
    """A required text (reason, answer): errors inline when empty, else decided in the pool."""
    if not text:
        ack(response_action="errors", errors={block_id: missing})
        return
    ack()
    services = services_of(context)
    action_id, seen = parse_choice(view.get("private_metadata"))
    services.run_later(
        decide, services, action_id, seen, actor_from(body), None, decision=decision, message=text
    )


def on_reject_submitted(
    ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
) -> None:
    _submit_text(
        ack,
        body,
        view,
        context,
        decision="reject",
        text=reject_reason(view),
        block_id=BlockId.REJECT_REASON,
        missing="Please give a reason.",
    )


def on_respond_submitted(
    ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
) -> None:
    _submit_text(
        ack,
        body,
        view,
        context,
        decision="respond",
        text=respond_answer(view),
        block_id=BlockId.RESPOND_ANSWER,
        missing="Please write an answer.",
    )


def on_edit_submitted(
    ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
) -> None:
    """Validate with the tool's own schema now, so errors show on the right field; nothing
    reaches the checkpointer until the arguments are valid."""
    services = services_of(context)
    action_id, seen = parse_choice(view.get("private_metadata"))
    form = services.engine.edit_form(action_id)
    if form is None:
        ack()
        services.run_later(
            decide, services, action_id, seen, actor_from(body), None, decision="edit"
        )
        return
    schema, current = form
    args, errors = parse_edit(view, schema=schema, current=current)
    if not errors:
        fields = [b.get("block_id") for b in view.get("blocks", []) if b.get("type") == "input"]
        for name, message in services.engine.edit_errors(action_id, args).items():
            block = field_block_id(name)
            errors[block if block in fields else (fields[0] if fields else block)] = message
    if errors:
        ack(response_action="errors", errors=errors)
        return
    ack()
    services.run_later(
        decide,
        services,
        action_id,
        seen,
        actor_from(body),
        None,
        decision="edit",
        edited_args=args,
    )
