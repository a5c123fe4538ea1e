"""Cancel run: stored in the decision inbox before the ack, like every decision click; the
inbox worker asks the engine, which decides who may cancel. The thread tells of a cancel that
happened; anything else is answered to the clicker alone."""

from __future__ import annotations

import uuid

from slack_bolt import Ack, BoltContext

from bot.errors import cancel_text
from bot.ids import ActionId
from bot.listeners.actions.decide import click_work, store_then_ack, tell
from bot.listeners.payloads import Click, payload_of
from bot.services import BotServices, services_of
from bot.work import Work
from store.inbox_models import InboxKind


def on_cancel_run(ack: Ack, context: BoltContext) -> None:
    click = payload_of(context, Click)
    services = services_of(context)
    services.metrics.inc("clicks")
    work = click_work(click, run_id=click.action.value[:64])
    store_then_ack(ack, services, InboxKind.CANCEL, work)


def cancel_run(services: BotServices, work: Work, *, attempt_key: str | None) -> None:
    """Cancel the run the button named, if this user may; a refusal (audited by the engine)
    is told to the user only."""
    via = {"via": str(ActionId.CANCEL_RUN), "attempt": attempt_key or uuid.uuid4().hex}
    result = services.engine.cancel_run((work.run_id or "")[:64], actor=work.who, via=via)
    if result.cancelled:
        services.metrics.inc("runs_cancelled")
        return
    services.metrics.inc("cancels_refused")
    tell(services, work.channel, work.who, text=cancel_text(result))
