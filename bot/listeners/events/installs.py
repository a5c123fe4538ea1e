"""A workspace that removes the app, or whose bot token is revoked: its stored tokens are
deleted (installs by OAuth), so nothing more is sent with them and its requests are refused.
Off the thread that answers Slack: the deletion may wait for a token refresh under way."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, BoltContext

from bot.services import services_of


def register(app: App) -> None:
    app.event("app_uninstalled")(on_uninstalled)
    app.event("tokens_revoked")(on_tokens_revoked)


def on_uninstalled(context: BoltContext) -> None:
    services = services_of(context)
    services.after_ack(None, services.workspaces.removed, context.team_id)


def on_tokens_revoked(event: dict[str, Any], context: BoltContext) -> None:
    if (event.get("tokens") or {}).get("bot"):
        services = services_of(context)
        services.after_ack(None, services.workspaces.removed, context.team_id)
