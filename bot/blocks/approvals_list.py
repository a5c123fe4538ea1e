"""``/approvals``: an ephemeral list of what waits on the caller, a page at a time, and the
caller's own requests. Tool names are the agent's text, shown as code (see ``bot.text``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_runtime.listing import Page
from agent_runtime.views import ActionView, ApprovalView
from bot.blocks.links import linked, message_url
from bot.ids import APPROVALS_COMMAND, ActionId
from bot.text import clip, mention, mrkdwn, verbatim

PAGE_SIZE = 10
REQUESTED_SHOWN = 5
PAGER_BLOCK = "approvals_pager"
_RISKS = ("none", "low", "medium", "high")
_TOOLS_SHOWN = 3


def when(at: dt.datetime) -> str:
    """A date Slack shows in the reader's time zone, with a UTC fallback."""
    fallback = at.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def card_url(approval: ApprovalView, workspace_url: str | None) -> str | None:
    return message_url(
        workspace_url,
        channel=approval.card_channel,
        ts=approval.card_ts,
        thread_ts=approval.run.thread_ts,
    )


def _open(approval: ApprovalView) -> list[ActionView]:
    return [a for a in approval.actions if a.outcome is None] or list(approval.actions)


def _risk(actions: list[ActionView]) -> str:
    ranked = sorted((_RISKS.index(a.risk) if a.risk in _RISKS else 0, a.risk) for a in actions)
    return ranked[-1][1] if ranked else "none"


def _tools(actions: list[ActionView]) -> str:
    names = [verbatim(a.tool_name, 100) for a in actions[:_TOOLS_SHOWN]]
    more = len(actions) - _TOOLS_SHOWN
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def approval_line(approval: ApprovalView, *, workspace_url: str | None) -> str:
    """One approval as a list item: a link to its card, its open tools, risk, requester and
    expiry (all from ids and policy words, except the tool names, which are code)."""
    actions = _open(approval)
    title = linked(card_url(approval, workspace_url), f"Approval {mrkdwn(approval.id, 80)}")
    return clip(
        f"*{title}*  {_tools(actions)}\n"
        f"Risk *{mrkdwn(_risk(actions), 20)}*  ·  requested by {mention(approval.requester_id)}"
        f"  ·  expires {when(approval.expires_at)}",
        3000,
    )


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000) or " "}}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, 3000) or " "}]}


def _pager(page: Page, *, after: str | None) -> dict[str, Any] | None:
    buttons: list[dict[str, Any]] = []
    if after is not None:
        buttons.append(_page_button("First page", ""))
    if page.next_after is not None:
        buttons.append(_page_button("Next page", page.next_after))
    if not buttons:
        return None
    return {"type": "actions", "block_id": PAGER_BLOCK, "elements": buttons}


def _page_button(label: str, value: str) -> dict[str, Any]:
    """The value is an opaque request id (where the page starts), never a filter or a user:
    the list is computed again, for whoever clicks, from the policy."""
    button: dict[str, Any] = {
        "type": "button",
        "action_id": ActionId.APPROVALS_PAGE,
        "text": {"type": "plain_text", "text": label},
    }
    if value:
        button["value"] = value
    return button


def approvals_list(
    page: Page,
    *,
    requested: list[ApprovalView],
    workspace_url: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """``{"text", "blocks"}``: the page of approvals the caller may decide now (``after``: the
    request this page starts after, None for the first), then the caller's own waiting
    requests (first page only)."""
    heading = "*Waiting on you*" if after is None else "*Waiting on you* (continued)"
    blocks: list[dict[str, Any]] = [section(heading)]
    if page.items:
        blocks += [section(approval_line(a, workspace_url=workspace_url)) for a in page.items]
    else:
        blocks.append(context("Nothing waits on you right now."))
    pager = _pager(page, after=after)
    if pager is not None:
        blocks.append(pager)
    if requested and after is None:
        blocks += [{"type": "divider"}, section("*Your requests*, waiting on reviewers")]
        blocks += [
            section(approval_line(a, workspace_url=workspace_url))
            for a in requested[:REQUESTED_SHOWN]
        ]
        hidden = len(requested) - REQUESTED_SHOWN
        if hidden > 0:
            blocks.append(context(f"and {hidden} more of your requests"))
    count = len(page.items)
    text = (
        f"{count} approval{'s' if count != 1 else ''} waiting on you"
        if count
        else ("Nothing waits on you right now")
    )
    return {"text": text, "blocks": blocks}


USAGE = (
    f"Usage: `{APPROVALS_COMMAND}` lists what waits on you and your own requests "
    f"(`{APPROVALS_COMMAND} list` too). Admins: `{APPROVALS_COMMAND} pause [reason]` stops "
    f"all gated actions, `{APPROVALS_COMMAND} resume` lets them run again."
)
