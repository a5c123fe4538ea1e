"""Cards and digests are posted once and found again: each carries message metadata naming
what it shows, is posted without the retry after a dropped connection, and is looked for by
that metadata before it is ever posted again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from agent_runtime.notifier import MessageRef

HISTORY_PAGES = 5
"""How far back a review or digest channel is looked in (pages of 200): a card or digest is
looked for seconds after its post, so it is among the newest messages."""
CARD_EVENT = "approval_card"
"""Message metadata ``event_type`` of our cards; ``event_payload.request_id`` names the request."""
DIGEST_EVENT = "approval_digest"
"""Message metadata ``event_type`` of our digests; ``event_payload.digest_id`` names it."""


def card_tag(request_id: str) -> dict[str, Any]:
    return {"event_type": CARD_EVENT, "event_payload": {"request_id": request_id}}


def digest_tag(digest_id: str) -> dict[str, Any]:
    return {"event_type": DIGEST_EVENT, "event_payload": {"digest_id": digest_id}}


def find_tagged(
    read: Callable[[str | None], Any],
    *,
    channel: str,
    author: str | None,
    tag: dict[str, Any],
    pages: int | None = None,
) -> MessageRef | None:
    """The first message of ``author`` carrying ``tag``, in the pages ``read(cursor)`` returns:
    at most ``pages`` of them, or all of them."""
    cursor = None
    while pages is None or pages > 0:
        page = read(cursor)
        for message in page.get("messages") or []:
            if message.get("user") == author and _carries(message, tag):
                return MessageRef(channel=channel, ts=str(message["ts"]))
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            return None
        pages = None if pages is None else pages - 1
    return None


def _carries(message: dict[str, Any], tag: dict[str, Any]) -> bool:
    meta = message.get("metadata") or {}
    payload = meta.get("event_payload") or {}
    return meta.get("event_type") == tag["event_type"] and all(
        payload.get(key) == value for key, value in tag["event_payload"].items()
    )


def single_attempt(client: WebClient) -> WebClient:
    """``client`` without the retry after a dropped connection: a post that Slack may already
    have taken is not sent twice. The reconciler retries it, after looking for it first."""
    return WebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        ssl=client.ssl,
        proxy=client.proxy,
        headers=client.headers,
        retry_handlers=[
            h for h in client.retry_handlers if not isinstance(h, ConnectionErrorRetryHandler)
        ],
    )
