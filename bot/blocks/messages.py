"""Thread messages: the run's root message and its result."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import RunView
from bot.text import mention, mrkdwn


def run_root_message(run: RunView) -> dict[str, Any]:
    text = f"{mention(run.requester_id)} asked the agent: {mrkdwn(run.request_text, 2500)}"
    return {
        "text": mrkdwn(f"Agent run requested: {run.request_text}", 500),
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
    body = mrkdwn(run.result_text or "(no result)", 2800)
    return {
        "text": mrkdwn(f"{title}: {run.result_text or ''}", 500),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*\n{body}"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"run {run.id}"}]},
        ],
    }


def call_blocked_message(*, tool_name: str, reason: str) -> dict[str, Any]:
    """A gated tool refused to act: the agent tried it without a matching approval."""
    text = (
        f":no_entry: *Blocked:* `{mrkdwn(tool_name, 200)}` did not run because "
        f"{mrkdwn(reason, 500)}. Nothing was changed; only calls approved here can run."
    )
    return {
        "text": mrkdwn(f"Blocked: {tool_name} did not run ({reason})", 500),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }
