"""Events: keep the cached user group members fresh; publish the Home tab when opened; forget
a workspace that removed the app."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, BoltContext

from bot.listeners.events import home, installs
from bot.services import services_of


def register(app: App) -> None:
    home.register(app)
    installs.register(app)
    app.event("subteam_members_changed")(on_members_changed)
    app.event("subteam_updated")(on_members_changed)


def on_members_changed(event: dict[str, Any], context: BoltContext) -> None:
    directory = services_of(context).directory
    group = event.get("subteam_id") or (event.get("subteam") or {}).get("id")
    if directory is not None:
        directory.forget(group)
