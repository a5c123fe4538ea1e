"""Slack's answers that no retry changes. A caller that gets one stops trying and says so,
instead of trying again at every maintenance round for good."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from slack_sdk.errors import SlackApiError

from agent_runtime.errors import Undeliverable
from bot.workspaces import TokenNotRefreshed, WorkspaceNotInstalled

IN_CHANNEL = frozenset(
    {"channel_not_found", "is_archived", "not_in_channel", "team_access_not_granted"}
)
"""A post in a channel or a thread: the channel is gone or archived, or the bot is not in it
(an invitation later does not bring back what was refused meanwhile)."""
RESTRICTED = "restricted_action"
"""The prefix of the answers to a post the channel's settings forbid (read-only, threads
locked or not allowed there)."""
MAY_PASS = frozenset(
    {
        "fatal_error",
        "internal_error",
        "rate_limited",
        "ratelimited",
        "request_timeout",
        "service_unavailable",
        "team_added_to_org",
        "token_expired",
    }
)
"""A direct message is the last place left to tell someone: any answer of Slack's but these
(its own trouble, a rate limit, a workspace moving, a token about to be rotated) ends its
tries, audited, rather than trying again at every round for good (a missing scope, a user
gone, a bot)."""
NOT_SLACKS = "Received a response in a non-JSON format"
"""How slack_sdk words an answer it could not read (a proxy's or a gateway's error page)."""


def refused_for_good(exc: BaseException, *, direct: bool = False) -> str | None:
    """Slack's error code when ``exc`` answers a post that no retry changes (``direct``: a
    direct message, opened and posted); None for anything that may pass (rate limits, Slack's
    own errors, a lost connection, an answer that is not Slack's). Only an answer of Slack's
    own, with its HTTP status 200, is ever final."""
    if not isinstance(exc, SlackApiError):
        return None
    try:
        status = exc.response.status_code
        error = str(exc.response.get("error") or "")
    except Exception:  # not a response slack_sdk made
        return None
    if status != 200 or error.startswith(NOT_SLACKS):
        return None
    if direct:
        return error if error and error not in MAY_PASS else None
    return error if error in IN_CHANNEL or error.startswith(RESTRICTED) else None


NOT_INSTALLED = "workspace_not_installed"
"""A workspace that removed the app: no token is left to post there with, until it installs
the app again."""
REFRESH_REFUSED = frozenset(
    {"account_inactive", "invalid_auth", "invalid_refresh_token", "token_revoked"}
)
"""Slack's answers to a token refresh that no retry changes: the same as a workspace that
removed the app (any other refused refresh, a rate limit say, may pass)."""


@contextmanager
def final_refusals(*, direct: bool = False) -> Iterator[None]:
    """A post inside: ``Undeliverable`` for an answer no retry changes (``refused_for_good``),
    or for a workspace that removed the app; anything else as it was raised."""
    try:
        yield
    except WorkspaceNotInstalled as exc:
        if isinstance(exc, TokenNotRefreshed) and exc.error not in REFRESH_REFUSED:
            raise
        raise Undeliverable(NOT_INSTALLED) from exc
    except SlackApiError as exc:
        if (refusal := refused_for_good(exc, direct=direct)) is None:
            raise
        raise Undeliverable(refusal) from exc
