"""``app_home_opened``: remember the viewer and publish their Home, on our worker pool."""

from __future__ import annotations

from slack_bolt import App, BoltContext

from agent_runtime.authorization import Actor
from bot.listeners.payloads import EventCallback, payload_of
from bot.services import services_of


def register(app: App) -> None:
    app.event("app_home_opened")(on_home_opened)


def on_home_opened(context: BoltContext) -> None:
    body = payload_of(context, EventCallback)
    event = body.event
    services = services_of(context)
    if event.tab not in (None, "home") or not event.user or services.home is None:
        return
    actor = Actor(user_id=event.user, team_id=body.team_id, enterprise_id=body.enterprise_id)
    services.submit(services.home.opened, actor)
