"""Thread messages: the run's root message and its result. What the requester asked and what the
agent answered are untrusted text, shown as code (see ``bot.text``)."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import RunView
from bot.text import mention, verbatim


def run_root_message(run: RunView) -> dict[str, Any]:
    text = f"{mention(run.requester_id)} asked the agent: {verbatim(run.request_text, 2500)}"
    return {
        "text": f"Agent run requested: {verbatim(run.request_text, 450)}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"run {run.id} · approvals appear in this thread"}
                ],
            },
        ],
    }


def run_result_message(run: RunView) -> dict[str, Any]:
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
