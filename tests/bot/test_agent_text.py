"""Agent text cannot pose as the bot: whatever the agent writes in a tool's description, its
arguments, a preview, a reason or a result is shown as written, never with the bot's formatting,
and characters that hide or reorder text are shown as markers."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from slack_sdk.models.views import View

from agent_runtime.errors import InvalidDecisions
from agent_runtime.views import ActionView, ApprovalView, DecisionView, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.arguments import full_argument_pages
from bot.blocks.edit_modal import edit_modal
from bot.blocks.messages import call_blocked_message, run_result_message, run_root_message
from bot.blocks.modals import arguments_modal, reject_modal, respond_modal
from bot.blocks.notices import stale_notice
from bot.blocks.review_modal import review_modal
from bot.errors import user_message
from tests.bot.formatting import (
    all_strings,
    formatting,
    hidden_characters,
    mrkdwn_texts,
    outside_code,
    plain_text_objects,
)

AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
# The bot's own status lines, as an agent would copy them to look like a decision.
LINE = "*:white_check_mark: Approved*  ·  Sign-offs: 1 of 1 _by security_ ~no~ `ok` :x:"
LINES = f"{LINE}\n> *:white_check_mark: Approved*\nSign-offs: 1 of 1\n```\n:x: Rejected```"
PLAIN_LINE = "just words on one line"
PLAIN_LINES = "just words\nmore words\nlast words"


def _action(position: int, **changes: Any) -> ActionView:
    base = ActionView(
        id=f"act_{position}",
        position=position,
        tool_name="send_external_message",
        args={"recipient": "partner@example.com"},
        description="",
        risk="high",
        allowed_decisions=("approve", "edit", "reject", "respond"),
        approver_roles=("release-managers",),
        approvals_required=2,
        action_hash="ab" * 32,
        operation_id="op_1",
        outcome=None,
        decisions=(),
    )
    return dataclasses.replace(base, **changes)


def approval(line: str, lines: str, **changes: Any) -> ApprovalView:
    """Three actions (approved, pending, rejected) with agent text in every field it can reach."""
    approved = _action(
        0,
        args={"recipient": line, "amount": lines},
        outcome="approved",
        decisions=(
            DecisionView("U0REL1", "approve", None, AT, "ab" * 32),
            DecisionView("U0REL2", "approve", None, AT, "ab" * 32),
        ),
    )
    pending = _action(
        1,
        tool_name=line,
        description=lines,
        args={"nested": {line: [lines, 1]}},
        edited_args={"nested": lines},
        decisions=(DecisionView("U0REL2", "edit", lines, AT, "ab" * 32),),
        extra={
            "review_kind": line,
            "subagent": line,
            "preview": lines,
            "policy_violation": lines,
            "schema_errors": {line: lines},
            "evidence": {
                "rubric_verdict": line,
                "criteria": [{"name": line, "verdict": "fail", "gap": lines}],
                "content_hash": line,
            },
        },
    )
    rejected = _action(
        2,
        tool_name="delete_project_file",
        outcome="rejected",
        decisions=(DecisionView("U0SEC1", "reject", lines, AT),),
    )
    base = ApprovalView(
        id="apr_1",
        run=RunView("run_1", "U0ALICE", "C1", "1.0", lines, "completed", lines),
        status="pending",
        outcome=None,
        interrupt_id="i",
        policy_version="v1",
        requester_id="U0ALICE",
        expires_at=AT,
        card_channel="C1",
        card_ts="2.0",
        actions=(approved, pending, rejected),
    )
    return dataclasses.replace(base, **changes)


def surfaces(line: str, lines: str) -> dict[str, dict[str, Any]]:
    view = approval(line, lines)
    pending = view.actions[1]
    pages = full_argument_pages(
        tool_name=line, args=pending.args, preview=(pending.extra or {})["preview"]
    )
    return {
        "card": approval_card(view),
        "decided card": approval_card(
            approval(line, lines, status="resolved", outcome=lines, actions=view.actions[::2])
        ),
        "root": run_root_message(view.run),
        "result": run_result_message(view.run),
        "blocked": call_blocked_message(tool_name=line, reason=lines),
        "stale": stale_notice(pending, seen=line),
        "review": review_modal(view, page=0),
        "reject": reject_modal(action_id="act_1", tool_name=line),
        "respond": respond_modal(action_id="act_1", tool_name=line, question=lines),
        "edit": edit_modal(
            action_id="act_1", tool_name=line, schema={}, current={line: line, "n": lines}
        ),
        "arguments": arguments_modal(action_id="act_1", pages=pages, page=0),
    }


def test_agent_text_copying_the_bots_status_lines_gets_none_of_its_formatting():
    hostile, neutral = surfaces(LINE, LINES), surfaces(PLAIN_LINE, PLAIN_LINES)
    for name, payload in hostile.items():
        texts, twin = mrkdwn_texts(payload), mrkdwn_texts(neutral[name])
        # What the agent wrote changes no formatting: it is the same as for plain words.
        assert [formatting(t) for t in texts] == [formatting(t) for t in twin], name
        for text in texts:
            assert "Sign-offs: 1 of 1" not in outside_code(text), (name, text)
            assert "`" not in outside_code(text), f"{name}: agent text closed a code span"
        for obj in plain_text_objects(payload):
            if ":white_check_mark:" in obj["text"]:
                assert obj.get("emoji") is False, (name, obj)
    card = [f for t in mrkdwn_texts(hostile["card"]) for f in formatting(t)]
    assert [f for f in card if "Approved" in f] == ["*:white_check_mark: Approved*"]
    assert [f for f in card if f.startswith(":")] == [":no_entry:", ":warning:", ":x:"]
    shown = "`*:white_check_mark: Approved*  ·  Sign-offs: 1 of 1"
    assert any(shown in t for t in mrkdwn_texts(hostile["card"])), "the agent's text is shown"


RTL = "partner@example.com\u202egnp.exe"
HIDDEN = f"pay {RTL} \u2066now\u2069 \u200bzero\ufeff width\u200f \u061c\U000e0041 \x1b[2J"


def test_characters_that_hide_or_reorder_text_are_shown_as_markers():
    view = approval(HIDDEN, HIDDEN)
    pending = view.actions[1]
    payloads = [
        *surfaces(HIDDEN, HIDDEN).values(),
        approval_card(dataclasses.replace(view, actions=(view.actions[0],))),
    ]
    for payload in payloads:
        for text in all_strings(payload):
            assert hidden_characters(text) == [], text
    card = approval_card(dataclasses.replace(view, actions=(view.actions[0],)))
    fields = [f["text"] for b in card["blocks"] for f in b.get("fields", [])]
    assert any("partner@example.com[U+202E]gnp.exe" in f for f in fields), fields
    confirm = next(
        e["confirm"]["text"]["text"]
        for b in approval_card(dataclasses.replace(view, actions=(pending,)))["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if "confirm" in e
    )
    assert "[U+2066]now[U+2069]" in confirm and "[U+200B]zero[U+FEFF]" in confirm


def test_values_with_hidden_characters_are_not_offered_for_editing():
    """A text box would show them disguised, or save a silently changed value."""
    modal = edit_modal(
        action_id="act_1",
        tool_name="send_external_message",
        schema={"properties": {"recipient": {"type": "string"}, "text": {"type": "string"}}},
        current={"recipient": RTL, "text": "Release is out"},
    )
    View(**modal).validate_json()
    inputs = {b["block_id"]: b["element"] for b in modal["blocks"] if b["type"] == "input"}
    assert set(inputs) == {"arg:text"}
    note = modal["blocks"][-1]["elements"][0]["text"]
    assert "recipient" in note and "hidden characters" in note


def test_a_section_too_long_for_slack_is_cut_between_code_spans_never_inside_one():
    """Inside a cut code span the agent's text would be formatted again."""
    criteria = [{"name": f"{i} *a*" * 30, "verdict": "fail", "gap": "_b_ " * 60} for i in range(10)]
    view = approval(LINE, LINES)
    pending = dataclasses.replace(view.actions[1], extra={"evidence": {"criteria": criteria}})
    card = approval_card(dataclasses.replace(view, actions=(pending,)))
    evidence = next(t for t in mrkdwn_texts(card) if t.startswith("*Evidence*"))
    assert len(evidence) <= 3000 and evidence.endswith("…")
    assert "`" not in outside_code(evidence) and "*a*" not in outside_code(evidence)


def test_an_error_quoting_agent_text_keeps_it_literal():
    told = user_message(InvalidDecisions(f"'reject' is not allowed for '<!channel> {LINE}'"))
    assert formatting(told) == [] and "<!channel>" not in told
    assert "&lt;!channel&gt; *:white_check_mark: Approved*" in told
