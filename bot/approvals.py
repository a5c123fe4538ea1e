"""``/approvals``: what it shows, computed for whoever asked (the list and each page of it are
read again from the store and the policy: nothing in a button says whose list it is)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent_runtime.authorization import Actor
from bot.blocks.approvals_list import PAGE_SIZE, REQUESTED_SHOWN, approvals_list
from bot.services import BotServices

_REQUEST_ID = re.compile(r"^apr_[0-9a-f]{32}$")

Reply = Callable[..., Any]


def page_start(value: str | None) -> str | None:
    """The request a page starts after, from a button value; anything else is page one."""
    value = (value or "").strip()
    return value if _REQUEST_ID.match(value) else None


def show_approvals(
    services: BotServices, actor: Actor, reply: Reply, *, after: str | None = None
) -> None:
    """Answer through the command's or the click's ``response_url`` (ephemeral); a page turn
    replaces the list it was clicked on."""
    overview = services.engine.overview
    page = overview.waiting(actor, size=PAGE_SIZE, after=after)
    requested = overview.requested_by(actor, limit=REQUESTED_SHOWN + 1) if after is None else []
    message = approvals_list(
        page, requested=requested, workspace_url=services.workspaces.url(actor.team_id), after=after
    )
    reply(**message, response_type="ephemeral", replace_original=after is not None)
