"""``/agent <request>``: ack at once, then start the run on our own worker pool."""

from __future__ import annotations

from slack_bolt import Ack, App, BoltContext, Respond

from bot.blocks.messages import run_root_message
from bot.errors import BUSY, user_message
from bot.ids import SLASH_COMMAND
from bot.listeners.commands import approvals
from bot.listeners.payloads import Command, payload_of
from bot.services import BotServices, Drop, services_of
from bot.slack_notifier import NO_UNFURL

USAGE = (
    "Tell the agent what to do, e.g. `/agent publish the weekly report`, or one action per line: "
    '`send_external_message {"recipient": "a@example.com", "text": "hi"}`'
)


def register(app: App) -> None:
    app.command(SLASH_COMMAND)(on_agent_command)
    approvals.register(app)


def on_agent_command(ack: Ack, context: BoltContext, respond: Respond) -> None:
    command = payload_of(context, Command)
    text = command.text.strip()
    if not text:
        ack(text=USAGE)
        return
    ack()
    services = services_of(context)
    actor = command.actor
    services.metrics.inc("slash_commands")
    # Without a response_url Bolt gives no ``respond``: tell in the command's channel instead.
    drop = Drop(
        actor=actor,
        what=SLASH_COMMAND,
        channel=command.channel_id,
        reply=respond if command.response_url else None,
        notice=BUSY,
    )
    services.run_later(drop, start_run, services, drop, text)


def start_run(services: BotServices, drop: Drop, text: str) -> None:
    """Errors before the run is under way are told to the requester; later ones are the
    run's own (its thread says how it ended)."""
    channel_id = drop.channel
    assert channel_id is not None
    try:
        with services.engine.starting_run(
            actor=drop.actor, channel_id=channel_id, text=text
        ) as run:
            root = services.slack(drop.actor.team_id).chat_postMessage(
                channel=channel_id, **run_root_message(run), **NO_UNFURL
            )
            services.engine.set_thread(run.id, root["ts"])
    except Exception as exc:
        services.tell(drop, user_message(exc))
        return
    services.engine.execute_run(run.id)
