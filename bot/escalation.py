"""Posts in the escalation channel. It belongs to one workspace however many installed the app,
while what is announced there (the kill switch) may come from an admin of any workspace or from
an operator at a shell: the post goes out with a token of the channel's own workspace."""

from __future__ import annotations

import logging
import threading
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.workspaces import WorkspaceNotInstalled, Workspaces

logger = logging.getLogger(__name__)
ELSEWHERE = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "invalid_auth",
        "not_authed",
        "token_revoked",
        "token_expired",
        "account_inactive",
    }
)
"""Slack's answers to a token whose workspace cannot post in the channel (or whose token no
longer works at all): nothing was posted, and another workspace may."""


class EscalationPoster:
    """Tries the workspace that last posted in the channel, then each installed workspace
    (the earliest install first: usually the deployment's own), then the one that asked;
    the first that Slack lets post is remembered. With one bot token there is one try."""

    def __init__(self, workspaces: Workspaces) -> None:
        self.workspaces = workspaces
        self._owners: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def owner(self, channel: str) -> tuple[bool, str | None]:
        """Whether the channel's workspace is known here, and which it is."""
        with self._lock:
            return channel in self._owners, self._owners.get(channel)

    def candidates(self, channel: str, *, asking: str | None) -> list[str | None]:
        known, owner = self.owner(channel)
        try:
            installed: list[str] = self.workspaces.installed_teams()
        except Exception:
            logger.warning("could not list the installed workspaces", exc_info=True)
            installed = []
        ordered: list[str | None] = []
        for team in [*([owner] if known else []), *installed, asking]:
            if team not in ordered:
                ordered.append(team)
        return ordered

    def post(self, channel: str, *, asking: str | None, message: dict[str, Any]) -> None:
        """``asking``: the workspace of whoever caused the post (None from a shell), tried
        last. Raises the last refusal when no workspace could post."""
        refusals: list[str] = []
        last: Exception | None = None
        for team in self.candidates(channel, asking=asking):
            try:
                self.workspaces.client(team).chat_postMessage(channel=channel, **message)
            except WorkspaceNotInstalled as exc:
                refusals.append(f"{team}: not installed")
                last = exc
                continue
            except SlackApiError as exc:
                error = exc.response.get("error")
                if error not in ELSEWHERE:
                    raise
                refusals.append(f"{team}: {error}")
                last = exc
                continue
            with self._lock:
                self._owners[channel] = team
            if refusals:
                logger.info(
                    "posted in %s as workspace %s (refused: %s)",
                    channel,
                    team,
                    "; ".join(refusals),
                )
            return
        logger.warning("no workspace could post in %s (%s)", channel, "; ".join(refusals))
        if last is None:
            raise WorkspaceNotInstalled(asking)
        raise last
