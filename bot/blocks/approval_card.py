"""The approval card: one pure function renders every state of it, so an update is a re-render."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from agent_runtime.revisions import REVISION
from agent_runtime.views import ActionView, ApprovalView
from bot.blocks.action_notes import context, evidence_text, problems, revision_text, section
from bot.blocks.arguments import args_markup, edit_diff
from bot.blocks.card_buttons import (
    action_buttons,
    approve_all_row,
    cancel_run_row,
    review_all_row,
)
from bot.ids import BlockId
from bot.text import clip, code_block, mention, mrkdwn, plain, verbatim

MAX_BLOCKS = 50
_SAFE_URL = re.compile(r"^https?://[A-Za-z0-9.:-]+/?$")
_TS = re.compile(r"^\d{1,12}\.\d{1,8}$")
_CHANNEL = re.compile(r"^[CGD][A-Z0-9]{1,20}$")
FULL_ACTIONS = 5  # beyond this many actions, each row is rendered compactly
HEADERS = {  # each status's card header
    "pending": "Approval needed",
    "resuming": "Decided, resuming the run",
    "resolved": "Decided",
    "expired": "Expired: treated as rejected",
    "invalidated": "Invalidated: nothing ran",
    "failed": "Could not resume",
    "cancelled": "Cancelled: nothing ran",
}
_OUTCOME_ICONS = {
    "approved": ":white_check_mark: Approved",
    "rejected": ":x: Rejected",
    "responded": ":speech_balloon: Answered",
    "edited": ":pencil2: Approved with edits",
    "expired": ":hourglass: Expired: rejected",
}
_VERBS = {
    "approve": "approved",
    "reject": "rejected",
    "respond": "answered",
    "edit": "edited and approved",
}


def approval_card(approval: ApprovalView, *, workspace_url: str | None = None) -> dict[str, Any]:
    """``{"text": ..., "blocks": [...]}`` for chat.postMessage and chat.update.
    ``workspace_url`` (from auth.test) turns the run id into a link to the run's thread."""
    head: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _header(approval)}},
        section(
            f"*Requested by* {mention(approval.requester_id)}"
            + (
                f"  ·  *Environment:* {mrkdwn(approval.environment, 64)}"
                if approval.environment
                else ""
            )
            + f"\n*Request:* {verbatim(approval.run.request_text, 600)}"
        ),
    ]
    if approval.away_from_run:
        head.append(context(_origin(approval, workspace_url)))
    compact = len(approval.actions) > FULL_ACTIONS
    body: list[dict[str, Any]] = []
    tail = _tail(approval, workspace_url, bulk=approve_all_row(approval))
    shown = 0
    for action in approval.actions:
        rows = _action_blocks(approval, action, compact=compact)
        if len(head) + len(body) + len(rows) + len(tail) + 1 > MAX_BLOCKS:
            break
        body.extend(rows)
        shown += 1
    hidden = len(approval.actions) - shown
    if hidden:
        # Nothing is approved unseen: no bulk approval over actions this card cannot show.
        tail = _tail(approval, workspace_url, bulk=review_all_row(approval))
        body.append(
            context(
                f"{hidden} more actions do not fit on this card. Use *Review all actions* to "
                "read and decide each of them."
            )
        )
    return {"text": _fallback(approval), "blocks": head + body + tail}


def _tail(
    approval: ApprovalView, workspace_url: str | None, *, bulk: dict[str, Any] | None
) -> list[dict[str, Any]]:
    tail: list[dict[str, Any]] = []
    if approval.status == "cancelled":
        tail.append(section(_cancelled_line(approval)))
    elif approval.status != "pending" and approval.outcome:
        tail.append(section(f"*Outcome:* {verbatim(approval.outcome, 1000)}"))
    if approval.status == "pending":
        rows = [
            bulk,
            cancel_run_row(approval.run, block_id=f"{BlockId.RUN_ROW_PREFIX}{approval.id}"),
        ]
        tail.extend(row for row in rows if row is not None)
    return [*tail, {"type": "divider"}, context(_footer(approval, workspace_url))]


def _cancelled_line(approval: ApprovalView) -> str:
    """Who cancelled the run and when, from the ids and times we recorded."""
    run = approval.run
    who = f" by {mention(run.cancelled_by)}" if run.cancelled_by else ""
    when = f" at {_when(run.cancelled_at)}" if run.cancelled_at else ""
    return f":no_entry_sign: *Cancelled{who}{when}.* The run was stopped; nothing here ran."


def shown_on_card(approval: ApprovalView) -> set[str]:
    """Ids of the actions the card draws with their own buttons: all that bulk approval may
    cover, checked again on the server when it is clicked."""
    ids = set()
    for block in approval_card(approval)["blocks"]:
        if block.get("type") == "actions" and block.get("block_id", "").startswith(
            BlockId.ACTION_ROW_PREFIX
        ):
            ids.add(block["block_id"].removeprefix(BlockId.ACTION_ROW_PREFIX))
    return ids


def _header(approval: ApprovalView) -> str:
    title = HEADERS.get(approval.status, approval.status)
    if approval.status == "pending":
        open_count = sum(1 for a in approval.actions if a.outcome is None)
        noun = "action" if open_count == 1 else "actions"
        title = f"{title}: {open_count} {noun} waiting"
    return plain(title, 150)


def _title(action: ActionView) -> str:
    extra = action.extra or {}
    line = (
        f"*{action.position + 1}.* {verbatim(action.tool_name, 200)}  ·  "
        f"risk *{mrkdwn(action.risk, 20)}*"
    )
    if extra.get("subagent"):
        line += f"  ·  from subagent {verbatim(str(extra['subagent']), 100)}"
    if extra.get("review_kind"):
        line += f"  ·  review: {verbatim(str(extra['review_kind']), 100)}"
    if action.tool_version:
        line += f"  ·  version {verbatim(action.tool_version, 64)}"
    if action.description:  # the business action in words, as the interrupt put it
        line += f"\n{verbatim(action.description, 500)}"
    return line


def _action_blocks(
    approval: ApprovalView, action: ActionView, *, compact: bool
) -> list[dict[str, Any]]:
    code, fields, truncated = args_markup(action.args)
    preview = (action.extra or {}).get("preview")
    first: dict[str, Any] = section(_title(action) + (f"\n{code}" if code else ""))
    if fields:
        first["fields"] = fields
    blocks = [{"type": "divider"}, first]
    blocks += problems(action.extra or {})
    revision = (action.extra or {}).get(REVISION)
    if isinstance(revision, dict):
        blocks.append(section(revision_text(action, revision)))
    evidence = (action.extra or {}).get("evidence")
    if isinstance(evidence, dict) and evidence:
        blocks.append(section(evidence_text(evidence)))
    if preview and not compact:
        blocks.append(section("*Preview*\n" + code_block(str(preview), 1500)))
        truncated |= len(str(preview)) > 1400
    # An edit is shown as a diff that may be cut: the whole edited version is one click away.
    truncated |= action.edited_args is not None
    if action.edited_args is not None:
        blocks.append(
            section(
                f"*Edited arguments* (before → after)\n{edit_diff(action.args, action.edited_args)}"
            )
        )
    notes = [_rules(action), _decided_line(action), _progress(approval, action)]
    if compact:
        blocks.append(context("\n".join(n for n in notes if n)))
    else:
        blocks += [context(notes[0])]
        blocks += [section(notes[1])] if notes[1] else []
        blocks += [context(notes[2])] if notes[2] else []
    buttons = action_buttons(approval, action, truncated=truncated or bool(preview and compact))
    if buttons:
        blocks.append(buttons)
    return blocks


def _rules(action: ActionView) -> str:
    if action.exempt:
        who = "No review needed: the policy's conditions do not apply to these arguments"
    else:
        approvers = ", ".join(action.approver_roles) or "any approver role"
        count = len(action.approvers)
        who = f"May decide: {approvers}  ·  Sign-offs: {count} of {action.approvals_required}"
    call = f"  ·  Call {action.tool_call_id}" if action.tool_call_id else ""
    return mrkdwn(
        f"{who}  ·  Action hash {action.action_hash[:12]}  ·  Operation {action.operation_id}"
        + call,
        1000,
    )


def _progress(approval: ApprovalView, action: ActionView) -> str:
    """For an open action: who signed off, and who is still needed (and who cannot be)."""
    if approval.status != "pending" or action.outcome is not None or action.exempt:
        return ""
    signed = action.approvers
    head = f"{len(signed)} of {action.approvals_required} approvals"
    if action.edited_args is not None:
        head += " of the edited version (approvals of the earlier version no longer count)"
    if signed:
        head += ": " + ", ".join(mention(u) for u in signed)
    if "requester" in action.approver_roles:
        return f"{head}. Waiting for {mention(approval.requester_id)} to answer."
    roles = " or ".join(mrkdwn(r, 80) for r in action.approver_roles) or "an approver role"
    another = "another reviewer" if signed else "a reviewer"
    excluded = [f"{mention(approval.requester_id)}, who asked", *(mention(u) for u in signed)]
    return f"{head}. Waiting for {another} from {roles} (not {', nor '.join(excluded)})."


def _decided_line(action: ActionView) -> str:
    lines = []
    for decision in action.decisions[-5:]:
        verb = _VERBS.get(decision.type, decision.type)
        line = f"{mention(decision.reviewer_id)} {verb} at {_when(decision.at)}"
        if decision.message:
            line += f": {verbatim(decision.message, 400)}"
        lines.append(line)
    if action.outcome:
        lines.append(f"*{_OUTCOME_ICONS.get(action.outcome) or mrkdwn(action.outcome, 100)}*")
    return "\n".join(lines)


def _thread_url(approval: ApprovalView, workspace_url: str | None) -> str | None:
    """The run's root message, built from ids we hold (never from agent text). Built, not
    asked of Slack: the card is a pure function of the approval, redrawn often."""
    run = approval.run
    ts = run.thread_ts or ""
    if not workspace_url or not _SAFE_URL.match(workspace_url) or not _TS.match(ts):
        return None
    if not _CHANNEL.match(run.channel_id):
        return None
    return f"{workspace_url.rstrip('/')}/archives/{run.channel_id}/p{ts.replace('.', '')}"


def _run_link(approval: ApprovalView, workspace_url: str | None) -> str:
    url = _thread_url(approval, workspace_url)
    return f"<{url}|run {approval.run.id}>" if url else f"run {approval.run.id}"


def _origin(approval: ApprovalView, workspace_url: str | None) -> str:
    """On a card in a review channel: where the run is, and a link to its thread."""
    channel = approval.run.channel_id
    where = f"<#{channel}>" if _CHANNEL.match(channel) else mrkdwn(channel, 40)
    url = _thread_url(approval, workspace_url)
    thread = f"<{url}|open the run's thread>" if url else f"run {approval.run.id}"
    return f"Requested in {where}  ·  {thread}"


def _footer(approval: ApprovalView, workspace_url: str | None = None) -> str:
    expires = int(approval.expires_at.timestamp())
    fallback = approval.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Expires <!date^{expires}^{{date_short_pretty}} {{time}}|{fallback}>  ·  "
        f"policy {mrkdwn(approval.policy_version, 64)}  ·  approval {approval.id}  ·  "
        f"{_run_link(approval, workspace_url)}"
    )


def _fallback(approval: ApprovalView) -> str:
    tools = ", ".join(verbatim(a.tool_name, 100) for a in approval.actions)
    return clip(f"{HEADERS.get(approval.status, approval.status)}: {tools}", 2000)


def _when(at: dt.datetime) -> str:
    return f"<!date^{int(at.timestamp())}^{{time}}|{at.strftime('%H:%M UTC')}>"
