"""Which workspaces installed the app, read from the bot rows that Slack's installation store
keeps in our database (tables from migration 0015)."""

from __future__ import annotations

from sqlalchemy import column, func, select, table
from sqlalchemy.engine import Engine

BOTS = table("slack_bots", column("client_id"), column("team_id"), column("installed_at"))


def installed_teams(engine: Engine, *, client_id: str) -> list[str]:
    """Team ids holding a bot token of this app, the earliest first install first: the
    deployment's own workspace is usually the first to install it."""
    stmt = (
        select(BOTS.c.team_id)
        .where(BOTS.c.client_id == client_id, BOTS.c.team_id.is_not(None))
        .group_by(BOTS.c.team_id)
        .order_by(func.min(BOTS.c.installed_at), BOTS.c.team_id)
    )
    with engine.connect() as conn:
        return [str(team) for team in conn.execute(stmt).scalars()]
