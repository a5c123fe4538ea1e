"""The approval card: one pure function renders every state of it, so an update is a re-render."""

from __future__ import annotations

import datetime as dt
import difflib
import json
from typing import Any

from agent_runtime.views import ActionView, ApprovalView
from bot.ids import ActionId, BlockId
from bot.text import code_block, mention, mrkdwn, plain

MAX_ACTIONS_SHOWN = 8
_HEADERS = {
    "pending": "Approval needed",
    "resuming": "Decided, resuming the run",
    "resolved": "Decided",
    "expired": "Expired: treated as rejected",
    "invalidated": "Invalidated: nothing ran",
    "failed": "Could not resume",
}
_OUTCOME_ICONS = {
    "approved": ":white_check_mark: Approved",
    "rejected": ":x: Rejected",
    "responded": ":speech_balloon: Answered",
    "edited": ":pencil2: Approved with edits",
    "expired": ":hourglass: Expired: rejected",
}


def approval_card(approval: ApprovalView) -> dict[str, Any]:
    """``{"text": ..., "blocks": [...]}`` for chat.postMessage and chat.update."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _header(approval)}},
        _section(
            f"*Requested by* {mention(approval.requester_id)}\n"
            f"*Request:* {mrkdwn(approval.run.request_text, 600)}"
        ),
    ]
    shown = approval.actions[:MAX_ACTIONS_SHOWN]
    for action in shown:
        blocks.extend(_action_blocks(approval, action))
    hidden = len(approval.actions) - len(shown)
    if hidden > 0:
        blocks.append(_context(f"{hidden} more actions are not shown on this card."))
    if approval.status != "pending" and approval.outcome:
        blocks.append(_section(f"*Outcome:* {mrkdwn(approval.outcome, 1000)}"))
    blocks.append({"type": "divider"})
    blocks.append(_context(_footer(approval)))
    return {"text": _fallback(approval), "blocks": blocks}


def _header(approval: ApprovalView) -> str:
    title = _HEADERS.get(approval.status, approval.status)
    if approval.status == "pending":
        open_count = sum(1 for a in approval.actions if a.outcome is None)
        noun = "action" if open_count == 1 else "actions"
        title = f"{title}: {open_count} {noun} waiting"
    return plain(title, 150)


def _action_blocks(approval: ApprovalView, action: ActionView) -> list[dict[str, Any]]:
    blocks = [
        {"type": "divider"},
        _section(
            f"*{action.position + 1}. {mrkdwn(action.tool_name, 200)}*  ·  risk *{action.risk}*\n"
            f"{code_block(_pretty(action.args), 2600)}"
        ),
    ]
    if action.edited_args is not None:
        blocks.append(_section(f"*Edited arguments* (before → after)\n{_diff(action)}"))
    blocks.append(_context(_rules(action)))
    decided = _decided_line(action)
    if decided:
        blocks.append(_section(decided))
    progress = _progress(approval, action)
    if progress:
        blocks.append(_context(progress))
    if approval.status == "pending" and action.outcome is None:
        blocks.append(_buttons(action))
    return blocks


def _pretty(args: dict[str, Any]) -> str:
    return json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _diff(action: ActionView) -> str:
    before = _pretty(action.args).splitlines()
    after = _pretty(action.edited_args or {}).splitlines()
    lines = [
        line
        for line in difflib.unified_diff(before, after, lineterm="", n=1)
        if not line.startswith(("---", "+++", "@@"))
    ]
    return code_block("\n".join(lines) or "(no change)", 2600)


def _rules(action: ActionView) -> str:
    if action.exempt:
        who = "No review needed: the policy's conditions do not apply to these arguments"
    else:
        approvers = ", ".join(action.approver_roles) or "any approver role"
        count = len(action.approvers)
        who = f"May decide: {approvers}  ·  Sign-offs: {count} of {action.approvals_required}"
    return mrkdwn(
        f"{who}  ·  Action hash {action.action_hash[:12]}  ·  Operation {action.operation_id}",
        3000,
    )


def _progress(approval: ApprovalView, action: ActionView) -> str:
    """For an open action: who signed off, and who is still needed (and who cannot be)."""
    if approval.status != "pending" or action.outcome is not None or action.exempt:
        return ""
    signed = action.approvers
    needed = action.approvals_required
    head = f"{len(signed)} of {needed} approvals"
    if action.edited_args is not None:
        head += " of the edited version (approvals of the earlier version no longer count)"
    if signed:
        head += ": " + ", ".join(mention(u) for u in signed)
    roles = " or ".join(mrkdwn(r, 80) for r in action.approver_roles) or "an approver role"
    another = "another reviewer" if signed else "a reviewer"
    excluded = [f"{mention(approval.requester_id)}, who asked"]
    excluded += [mention(u) for u in signed]
    if "requester" in action.approver_roles:
        return f"{head}. Waiting for {mention(approval.requester_id)} to answer."
    return f"{head}. Waiting for {another} from {roles} (not {', nor '.join(excluded)})."


def _decided_line(action: ActionView) -> str:
    lines = []
    for decision in action.decisions:
        verb = {
            "approve": "approved",
            "reject": "rejected",
            "respond": "answered",
            "edit": "edited and approved",
        }.get(decision.type, decision.type)
        line = f"{mention(decision.reviewer_id)} {verb} at {_when(decision.at)}"
        if decision.message:
            line += f": {mrkdwn(decision.message, 500)}"
        lines.append(line)
    if action.outcome:
        lines.append(f"*{_OUTCOME_ICONS.get(action.outcome, action.outcome)}*")
    return "\n".join(lines)[:3000]


def _buttons(action: ActionView) -> dict[str, Any]:
    elements: list[dict[str, Any]] = []
    if "approve" in action.allowed_decisions:
        elements.append(_button("Approve", ActionId.APPROVE, action.id, style="primary"))
    if "reject" in action.allowed_decisions:
        elements.append(_button("Reject", ActionId.REJECT, action.id, style="danger"))
    return {
        "type": "actions",
        "block_id": f"{BlockId.ACTION_ROW_PREFIX}{action.id}",
        "elements": elements,
    }


def _button(label: str, action_id: str, value: str, *, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
        "style": style,
    }


def _footer(approval: ApprovalView) -> str:
    expires = int(approval.expires_at.timestamp())
    fallback = approval.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Expires <!date^{expires}^{{date_short_pretty}} {{time}}|{fallback}>  ·  "
        f"policy {mrkdwn(approval.policy_version, 64)}  ·  approval {approval.id}  ·  "
        f"run {approval.run.id}"
    )


def _fallback(approval: ApprovalView) -> str:
    tools = ", ".join(a.tool_name for a in approval.actions)
    return mrkdwn(f"{_HEADERS.get(approval.status, approval.status)}: {tools}", 2000)


def _when(at: dt.datetime) -> str:
    return f"<!date^{int(at.timestamp())}^{{time}}|{at.strftime('%H:%M UTC')}>"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000] or " "}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000] or " "}]}
