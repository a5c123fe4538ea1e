"""A page turn in the ``/approvals`` list: ack, then redraw the list for whoever clicked."""

from __future__ import annotations

from slack_bolt import Ack, BoltContext, Respond

from bot.approvals import page_start, show_approvals
from bot.listeners.payloads import Click, payload_of
from bot.services import Drop, services_of


def on_approvals_page(ack: Ack, context: BoltContext, respond: Respond) -> None:
    click = payload_of(context, Click)
    ack()
    services = services_of(context)
    drop = Drop(
        actor=click.actor, what=click.action.action_id, channel=click.channel_id, reply=respond
    )
    after = page_start(click.action.value)
    services.run_later(drop, show_approvals, services, click.actor, respond, after=after)
