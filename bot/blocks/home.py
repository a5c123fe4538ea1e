"""The bot's Home tab: what waits on you, your runs, what you decided recently. Each section
is cut to a few rows with a pointer to ``/approvals``, so the view stays within Slack's 100
blocks whatever the lists hold."""

from __future__ import annotations

from typing import Any

from agent_runtime.overview import DecidedRow, Home
from agent_runtime.views import RunView
from bot.blocks.approvals_list import approval_line, context, section, when
from bot.blocks.links import linked, message_url
from bot.ids import APPROVALS_COMMAND
from bot.text import mrkdwn, verbatim

MAX_BLOCKS = 100
WAITING_SHOWN = 15
RUNS_SHOWN = 10
DECIDED_SHOWN = 10
_RUN_STATUS = {
    "running": ":hourglass_flowing_sand: running",
    "waiting": ":raised_hand: waiting for approval",
    "completed": ":white_check_mark: finished",
    "failed": ":x: stopped",
}
_DECIDED = {
    "approve": "approved",
    "edit": "edited and approved",
    "reject": "rejected",
    "respond": "answered",
}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": text}}


def _more(hidden: int, *, at_least: bool = False) -> dict[str, Any]:
    count = f"{hidden}+" if at_least else str(hidden)
    return context(f"and {count} more — use `{APPROVALS_COMMAND}`")


def _rest(found: int, shown: int, *, limit: int) -> list[dict[str, Any]]:
    """The "and N more" line of a section that read ``found`` rows of at most ``limit``."""
    return [_more(found - shown, at_least=found >= limit)] if found > shown else []


def _run_line(run: RunView, workspace_url: str | None) -> str:
    url = message_url(workspace_url, channel=run.channel_id, ts=run.thread_ts)
    status = _RUN_STATUS.get(run.status) or mrkdwn(run.status, 30)
    title = linked(url, f"Run {mrkdwn(run.id, 80)}")
    return f"*{title}*  {status}\n{verbatim(run.request_text, 300)}"


def _decided_line(row: DecidedRow, workspace_url: str | None) -> str:
    url = message_url(
        workspace_url, channel=row.card_channel, ts=row.card_ts, thread_ts=row.thread_ts
    )
    title = linked(url, f"Approval {mrkdwn(row.request_id, 80)}")
    verb = _DECIDED.get(row.decision) or mrkdwn(row.decision, 20)
    return (
        f"*{title}*  you {verb} {verbatim(row.tool_name, 100)} {when(row.at)}"
        f"  ·  now {mrkdwn(row.request_status, 20)}"
    )


def home_view(home: Home, *, workspace_url: str | None = None) -> dict[str, Any]:
    """A ``views.publish`` view of type ``home`` with the three sections."""
    blocks: list[dict[str, Any]] = [_header("Waiting on you")]
    waiting = home.waiting.items
    if waiting:
        blocks += [
            section(approval_line(a, workspace_url=workspace_url)) for a in waiting[:WAITING_SHOWN]
        ]
        hidden = len(waiting) - WAITING_SHOWN
        more = home.waiting.next_after is not None
        if hidden > 0 or more:
            blocks.append(_more(max(hidden, 0), at_least=more))
    else:
        blocks.append(context("Nothing waits on you right now."))
    blocks += [{"type": "divider"}, _header("Your runs")]
    if home.runs:
        blocks += [section(_run_line(r, workspace_url)) for r in home.runs[:RUNS_SHOWN]]
        blocks += _rest(len(home.runs), RUNS_SHOWN, limit=home.limit)
    else:
        blocks.append(context("You have not started a run yet: try `/agent` in a channel."))
    blocks += [{"type": "divider"}, _header("Recently decided by you")]
    if home.decided:
        blocks += [section(_decided_line(d, workspace_url)) for d in home.decided[:DECIDED_SHOWN]]
        blocks += _rest(len(home.decided), DECIDED_SHOWN, limit=home.limit)
    else:
        blocks.append(context("You have not decided anything yet."))
    return {"type": "home", "blocks": blocks[:MAX_BLOCKS]}
