"""Modal submissions: reject reason, answer, edited arguments. Each is authorized again.

Each is stored in the decision inbox before the ack; if it cannot be stored, the answer is on
the form itself: the modal stays open with what the user entered, and the drop is audited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.blocks.edit_modal import errors_on_fields, parse_edit
from bot.blocks.modals import notice_modal, reject_reason, respond_answer
from bot.errors import BUSY_SUBMISSION
from bot.ids import BlockId, CallbackId, parse_choice
from bot.listeners.payloads import Submission, SubmittedView, payload_of
from bot.services import BotServices, services_of
from bot.work import Work
from store.inbox_models import InboxKind


def register(app: App) -> None:
    app.view(CallbackId.REJECT_MODAL)(on_reject_submitted)
    app.view(CallbackId.RESPOND_MODAL)(on_respond_submitted)
    app.view(CallbackId.EDIT_MODAL)(on_edit_submitted)


def busy_response(view: SubmittedView) -> dict[str, Any]:
    """An error on the form's first input (Slack shows errors on inputs only); a form without
    one gets a notice pushed on top of it, which leaves it as it was underneath."""
    inputs = view.input_blocks()
    if inputs:
        return {"response_action": "errors", "errors": {inputs[0]: BUSY_SUBMISSION}}
    return {
        "response_action": "push",
        "view": notice_modal(title="Try again", text=BUSY_SUBMISSION),
    }


def _hand_off(
    ack: Ack, services: BotServices, submission: Submission, *, decision: str, **details: Any
) -> None:
    """Store the decision for the inbox workers, then close the modal; if it cannot be stored,
    keep the modal open and audit the drop."""
    action_id, seen = parse_choice(submission.view.private_metadata)
    work = Work.of(
        submission.actor,
        what=submission.view.callback_id,
        action_id=action_id,
        seen=seen,
        decision=decision,
        **details,
    )
    if services.store(InboxKind.DECIDE, work.model_dump(mode="json")):
        ack()
        return
    ack(**busy_response(submission.view))
    services.dropped(work.drop(), tell=False)


def _submit_text(
    ack: Ack,
    context: BoltContext,
    *,
    decision: str,
    text_of: Callable[[dict[str, Any]], str],
    block_id: str,
    missing: str,
) -> None:
    """A required text (reason, answer): errors inline when empty, else decided in the pool."""
    submission = payload_of(context, Submission)
    text = text_of(submission.view.as_dict())
    if not text:
        ack(response_action="errors", errors={block_id: missing})
        return
    _hand_off(ack, services_of(context), submission, decision=decision, message=text)


def on_reject_submitted(ack: Ack, context: BoltContext) -> None:
    _submit_text(
        ack,
        context,
        decision="reject",
        text_of=reject_reason,
        block_id=BlockId.REJECT_REASON,
        missing="Please give a reason.",
    )


def on_respond_submitted(ack: Ack, context: BoltContext) -> None:
    _submit_text(
        ack,
        context,
        decision="respond",
        text_of=respond_answer,
        block_id=BlockId.RESPOND_ANSWER,
        missing="Please write an answer.",
    )


def on_edit_submitted(ack: Ack, context: BoltContext) -> None:
    """Validate with the tool's own schema now, so errors show on the right field; nothing
    reaches the checkpointer until the arguments are valid."""
    submission = payload_of(context, Submission)
    services = services_of(context)
    action_id, _seen = parse_choice(submission.view.private_metadata)
    form = services.engine.edit_form(action_id)
    if form is None:  # refused by the worker, where the engine audits and explains it
        _hand_off(ack, services, submission, decision="edit")
        return
    schema, current = form
    args, errors = parse_edit(submission.view.as_dict(), schema=schema, current=current)
    if not errors:
        by_name = services.engine.edit_errors(action_id, args)
        errors = errors_on_fields(by_name, submission.view.input_blocks())
    if errors:
        ack(response_action="errors", errors=errors)
        return
    _hand_off(ack, services, submission, decision="edit", edited_args=args)
