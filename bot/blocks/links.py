"""Links to Slack messages, built from ids we hold (never from agent text).

Permalinks are built deterministically from the workspace URL (``auth.test``) instead of asking
``chat.getPermalink`` for each card: a list of twenty cards would cost twenty Web API calls
(Tier 4, per user, every page and every Home refresh) and fail as a whole when one call does,
while the URL scheme ``<workspace>/archives/<channel>/p<ts without the dot>`` (plus
``thread_ts`` and ``cid`` for a reply in a thread) is what Slack's own permalinks look like.
Anything malformed gives no link rather than a wrong one.
"""

from __future__ import annotations

import re

_SAFE_URL = re.compile(r"^https?://[A-Za-z0-9.:-]+/?$")
_TS = re.compile(r"^\d{1,12}\.\d{1,8}$")
_CHANNEL = re.compile(r"^[CGD][A-Z0-9]{1,20}$")


def message_url(
    workspace_url: str | None, *, channel: str | None, ts: str | None, thread_ts: str | None = None
) -> str | None:
    """The permalink of a message (a reply when ``thread_ts`` differs from ``ts``); None when
    any part is missing or not shaped as Slack's."""
    if not workspace_url or not _SAFE_URL.match(workspace_url):
        return None
    if not channel or not _CHANNEL.match(channel) or not ts or not _TS.match(ts):
        return None
    url = f"{workspace_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
    if thread_ts and thread_ts != ts and _TS.match(thread_ts):
        url += f"?thread_ts={thread_ts}&cid={channel}"
    return url


def linked(url: str | None, label: str) -> str:
    """``label`` (already safe mrkdwn without ``|`` or ``>``) as a link when there is a URL
    (its ``&`` escaped, as everywhere in mrkdwn)."""
    return f"<{url.replace('&', '&amp;')}|{label}>" if url else label
