"""Thread messages: the run's root message and its result. What the requester asked and what the
agent answered are untrusted text, shown as code (see ``bot.text``)."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import RunView
from bot.blocks.card_buttons import cancel_run_row
from bot.ids import BlockId
from bot.text import mention, verbatim


def run_root_message(run: RunView) -> dict[str, Any]:
    """The run's first message; it offers Cancel while the run is under way."""
    text = f"{mention(run.requester_id)} asked the agent: {verbatim(run.request_text, 2500)}"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"run {run.id} · approvals appear in this thread"}
            ],
        },
    ]
    cancel = cancel_run_row(run, block_id=f"{BlockId.RUN_ROW_PREFIX}{run.id}")
    return {
        "text": f"Agent run requested: {verbatim(run.request_text, 450)}",
        "blocks": [*blocks, cancel] if cancel else blocks,
    }


def run_result_message(run: RunView) -> dict[str, Any]:
    if run.status == "cancelled":
        return run_cancelled_message(run)
    title = "Run finished" if run.status == "completed" else "Run stopped"
    result = run.result_text or ""
    body = verbatim(result, 2800) if result else "(no result)"
    return {
        "text": f"{title}: {verbatim(result, 450)}" if result else title,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*\n{body}"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"run {run.id}"}]},
        ],
    }


def call_blocked_message(*, tool_name: str, reason: str) -> dict[str, Any]:
    """A gated tool refused to act: the agent tried it without a matching approval."""
    text = (
        f":no_entry: *Blocked:* {verbatim(tool_name, 200)} did not run because "
        f"{verbatim(reason, 500)}. Nothing was changed; only calls approved here can run."
    )
    return {
        "text": f"Blocked: {verbatim(tool_name, 200)} did not run ({verbatim(reason, 280)})",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }


def run_cancelled_message(run: RunView) -> dict[str, Any]:
    """The thread's line for a cancelled run: who and when, from what we recorded."""
    who = mention(run.cancelled_by) if run.cancelled_by else "someone"
    at = run.cancelled_at
    when = ""
    if at is not None:
        shown = "{date_short_pretty} {time}"
        when = f" at <!date^{int(at.timestamp())}^{shown}|{at:%Y-%m-%d %H:%M} UTC>"
    text = (
        f":no_entry_sign: *Run cancelled* by {who}{when}. Its open approvals were closed and "
        "nothing more of it runs."
    )
    return {
        "text": f"Run cancelled by {who}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"run {run.id}"}]},
        ],
    }


REFUSED_WHY = {
    "is_archived": "the channel is archived",
    "not_in_channel": "I am not in the channel any more",
    "channel_not_found": "I cannot find the channel any more",
}


def run_result_elsewhere_message(run: RunView, *, reason: str) -> dict[str, Any]:
    """The requester's direct message with a result their run's thread refused for good:
    the result as the thread would have shown it, and why it is here instead."""
    result = run_result_message(run)
    why = REFUSED_WHY.get(reason, "the channel does not let me post there")
    note = (
        f"I could not post this in the thread of your run in <#{run.channel_id}>: {why} "
        f"(Slack said {verbatim(reason, 80)})."
    )
    return {
        "text": result["text"],
        "blocks": [*result["blocks"], {"type": "context", "elements": [_mrkdwn(note)]}],
    }


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}
