"""The reject modal's submission: the reason is required, and the click is authorized again."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.blocks.modals import reject_reason
from bot.ids import BlockId, CallbackId
from bot.listeners.actions import decide
from bot.services import actor_from, services_of


def register(app: App) -> None:
    app.view(CallbackId.REJECT_MODAL)(on_reject_submitted)


def on_reject_submitted(
    ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
) -> None:
    reason = reject_reason(view)
    if not reason:
        ack(response_action="errors", errors={BlockId.REJECT_REASON: "Please give a reason."})
        return
    ack()
    services = services_of(context)
    action_id = str(view.get("private_metadata", ""))
    services.run_later(
        decide, services, action_id, actor_from(body), None, decision="reject", message=reason
    )
