"""``/approvals [subcommand]``: ack at once, then list on our worker pool. Subcommands are a
table, so new ones (e.g. ``pause``) are one entry; an unknown one gets the usage line."""

from __future__ import annotations

from collections.abc import Callable

from slack_bolt import Ack, App, BoltContext, Respond

from bot.approvals import show_approvals
from bot.blocks.approvals_list import USAGE
from bot.errors import BUSY, SWITCH_ANSWERS
from bot.ids import APPROVALS_COMMAND
from bot.listeners.payloads import Command, payload_of
from bot.services import BotServices, Drop, services_of

Subcommand = Callable[[BotServices, Command, Respond], None]


def _list(services: BotServices, command: Command, respond: Respond) -> None:
    show_approvals(services, command.actor, respond)


def _pause(services: BotServices, command: Command, respond: Respond) -> None:
    reason = command.text.strip().partition(" ")[2]
    result = services.switch.pause(command.actor, reason=reason)
    respond(text=SWITCH_ANSWERS[result.outcome], response_type="ephemeral")


def _resume(services: BotServices, command: Command, respond: Respond) -> None:
    result = services.switch.resume(command.actor)
    respond(text=SWITCH_ANSWERS[result.outcome], response_type="ephemeral")


SUBCOMMANDS: dict[str, Subcommand] = {
    "": _list,
    "list": _list,
    "pause": _pause,
    "resume": _resume,
}


def register(app: App) -> None:
    app.command(APPROVALS_COMMAND)(on_approvals_command)


def on_approvals_command(ack: Ack, context: BoltContext, respond: Respond) -> None:
    command = payload_of(context, Command)
    name = command.text.strip().split(maxsplit=1)[0].lower() if command.text.strip() else ""
    run = SUBCOMMANDS.get(name)
    if run is None:
        ack(text=USAGE)
        return
    ack()
    services = services_of(context)
    services.metrics.inc("slash_commands")
    drop = Drop(
        actor=command.actor,
        what=APPROVALS_COMMAND,
        channel=command.channel_id,
        reply=respond if command.response_url else None,
        notice=BUSY,
    )
    services.run_later(drop, run, services, command, respond)
