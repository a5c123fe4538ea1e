"""What a card says about one action beyond its call: the policy's or the schema's objections,
the workflow's evidence, and what a corrected call changed since the rejected one. Agent data
in them is escaped."""

from __future__ import annotations

from typing import Any

from agent_runtime.views import ActionView
from bot.blocks.arguments import edit_diff
from bot.text import clip, verbatim


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000) or " "}}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, 3000) or " "}]}


def problems(extra: dict[str, Any]) -> list[dict[str, Any]]:
    """What the policy or the tool's schema found wrong with the call as the agent made it."""
    found = []
    if extra.get("policy_violation"):
        violation = verbatim(str(extra["policy_violation"]), 900)
        found.append(section(f":no_entry: *Refused by the policy:* {violation}"))
    errors = extra.get("schema_errors")
    if isinstance(errors, dict) and errors:
        lines = "; ".join(
            f"{verbatim(str(k), 80)}: {verbatim(str(v), 200)}" for k, v in errors.items()
        )
        found.append(context(f":warning: Not valid for the tool: {lines}"))
    return found


def evidence_text(evidence: dict[str, Any]) -> str:
    """What the checks found, as the workflow reported it (agent data: escaped)."""
    lines = ["*Evidence*"]
    if evidence.get("rubric_verdict"):
        line = f"Rubric verdict: {verbatim(str(evidence['rubric_verdict']), 60)}"
        if evidence.get("grader"):
            line += f"  ·  graded by {verbatim(str(evidence['grader']), 20)}"
        if type(evidence.get("grader_iteration")) is int and evidence["grader_iteration"] > 0:
            line += f", evaluation {evidence['grader_iteration']}"
        lines.append(line)
    for item in list(evidence.get("criteria") or [])[:10]:
        if not isinstance(item, dict):
            continue
        mark = ":white_check_mark:" if item.get("verdict") == "pass" else ":x:"
        line = f"{mark} {verbatim(str(item.get('name', '')), 120)}"
        if item.get("gap"):
            line += f": {verbatim(str(item['gap']), 200)}"
        lines.append(line)
    if evidence.get("content_hash"):
        lines.append(f"Content hash (sha256): {verbatim(str(evidence['content_hash']), 66)}")
    return "\n".join(lines)


def revision_text(action: ActionView, revision: dict[str, Any]) -> str:
    """A corrected call: which rejection it answers, and what changed since the rejected one."""
    reason = str(revision.get("reason") or "")
    said = f" The reviewer said: {verbatim(reason, 500)}" if reason else ""
    earlier = revision.get("args")
    before: dict[str, Any] = earlier if isinstance(earlier, dict) else {}
    return (
        f"*Revision {int(revision.get('number', 1))}* of a call a reviewer rejected.{said}\n"
        f"*Changed since the rejected call* (before → after)\n{edit_diff(before, action.args)}"
    )
