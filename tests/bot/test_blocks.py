"""Block Kit builders: snapshots of every card state, slack_sdk validation, inert agent text."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from agent_runtime.views import ActionView, ApprovalView, DecisionView, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.messages import (
    run_result_elsewhere_message,
    run_result_message,
    run_root_message,
)
from bot.blocks.modals import reject_modal
from tests.bot.snapshot_files import assert_matches_snapshot

AT = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
HOSTILE = "<!channel> <!here> <@U0BOSS> <!subteam^S123> <https://evil.example|Approve> & ```"
RUN = RunView(
    id="run_1",
    requester_id="U0ALICE",
    channel_id="C1",
    thread_ts="1.0",
    request_text="send the release note",
    status="waiting",
    result_text=None,
)


def action(position: int = 0, **changes: Any) -> ActionView:
    base = ActionView(
        id=f"act_{position}",
        position=position,
        tool_name="send_external_message",
        args={"recipient": "partner@example.com", "text": "Release is out"},
        description="",
        risk="medium",
        allowed_decisions=("approve", "reject"),
        approver_roles=("release-managers", "security"),
        approvals_required=1,
        action_hash="ab" * 32,
        operation_id="op_1",
        outcome=None,
        decisions=(),
    )
    return dataclasses.replace(base, **changes)


def approval(*actions: ActionView, **changes: Any) -> ApprovalView:
    base = ApprovalView(
        id="apr_1",
        run=RUN,
        status="pending",
        outcome=None,
        interrupt_id="i1",
        policy_version="2026-11-30.1",
        requester_id="U0ALICE",
        expires_at=AT,
        card_channel="C1",
        card_ts="2.0",
        actions=actions or (action(),),
    )
    return dataclasses.replace(base, **changes)


APPROVED = DecisionView(
    reviewer_id="U0REL1", type="approve", message=None, at=AT, action_hash="ab" * 32
)
REJECTED = DecisionView(reviewer_id="U0SEC1", type="reject", message="not now", at=AT)
STATES = {
    "pending": approval(),
    "partly_decided": approval(
        action(0, outcome="approved", decisions=(APPROVED,)),
        action(1, tool_name="delete_project_file"),
    ),
    "resolved": approval(
        action(0, outcome="approved", decisions=(APPROVED,)),
        action(1, outcome="rejected", decisions=(REJECTED,)),
        status="resolved",
        outcome="send_external_message: approved, delete: rejected",
    ),
    "invalidated": approval(status="invalidated", outcome="the run is no longer waiting"),
    "dual_sign_off_one_of_two": approval(
        action(approvals_required=2, approver_roles=("release-managers",), decisions=(APPROVED,))
    ),
    "expired": approval(
        action(outcome="expired"), status="expired", outcome="send_external_message: expired"
    ),
    "edited_waiting_for_second": approval(
        action(
            approvals_required=2,
            edited_args={"recipient": "partner@example.com", "text": "Release 2.1 is out"},
            decisions=(
                APPROVED,
                DecisionView(
                    reviewer_id="U0REL2", type="edit", message=None, at=AT, action_hash="cd" * 32
                ),
            ),
            action_hash="cd" * 32,
        )
    ),
    "exempt_and_gated": approval(
        action(0, exempt=True, outcome="approved"), action(1, tool_name="publish_report")
    ),
    "failed": approval(status="failed", outcome="not resumed"),
    "in_production_with_its_own_words": approval(
        action(
            description="Tell partner@example.com that the release is out",
            tool_call_id="call_7f3a",
            tool_version="2.4.0",
        ),
        environment="production",
    ),
    "cancelled": approval(
        action(0, outcome="approved", decisions=(APPROVED,)),
        action(1, tool_name="delete_project_file"),
        status="cancelled",
        outcome="the run was cancelled",
        run=dataclasses.replace(RUN, status="cancelled", cancelled_by="U0OPS1", cancelled_at=AT),
    ),
    "in_review_channel": approval(review_channel="C0REVIEW", card_channel="C0REVIEW"),
}


def assert_valid_message(message: dict[str, Any]) -> None:
    assert message["text"]
    assert len(message["blocks"]) <= 50
    for raw in message["blocks"]:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()


@pytest.mark.parametrize("state", sorted(STATES))
def test_card_matches_snapshot_and_validates(state):
    card = approval_card(STATES[state])
    assert_valid_message(card)
    assert_matches_snapshot(card, f"approval_card_{state}")


def test_buttons_only_for_undecided_actions_of_a_pending_card():
    def button_values(view: ApprovalView, *, prefix: str = "action:") -> list[str]:
        return [
            e["value"]
            for b in approval_card(view)["blocks"]
            if b["type"] == "actions" and b["block_id"].startswith(prefix)
            for e in b["elements"]
        ]

    pending, partly = STATES["pending"].actions[0], STATES["partly_decided"].actions[1]
    assert button_values(STATES["pending"]) == [f"act_0:{pending.action_hash}"] * 2
    assert button_values(STATES["partly_decided"]) == [f"act_1:{partly.action_hash}"] * 2
    assert button_values(STATES["resolved"]) == []
    assert button_values(STATES["invalidated"]) == []
    assert button_values(STATES["cancelled"]) == []
    every = {state: button_values(view, prefix="") for state, view in STATES.items()}
    assert every["cancelled"] == [] and every["resolved"] == [] and every["expired"] == []


def test_cancel_run_is_offered_on_pending_cards_and_the_root_while_the_run_is_under_way():
    def cancel_values(message: dict[str, Any]) -> list[str]:
        return [
            e["value"]
            for b in message["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == "run.cancel"
        ]

    assert cancel_values(approval_card(STATES["pending"])) == ["run_1"]
    assert cancel_values(approval_card(STATES["partly_decided"])) == ["run_1"]
    for state in ("resolved", "expired", "invalidated", "failed", "cancelled"):
        assert cancel_values(approval_card(STATES[state])) == [], state
    for status, offered in (("running", True), ("waiting", True), ("completed", False)):
        root = run_root_message(dataclasses.replace(RUN, status=status))
        assert_valid_message(root)
        assert cancel_values(root) == (["run_1"] if offered else []), status
    cancelled_run = STATES["cancelled"].run
    assert cancel_values(run_root_message(cancelled_run)) == []
    line = run_result_message(cancelled_run)
    assert_valid_message(line)
    assert line["text"].startswith("Run cancelled by <@U0OPS1>")
    assert "<!date^" in json.dumps(line)


def test_a_cancelled_card_says_who_cancelled_and_when():
    rendered = json.dumps(approval_card(STATES["cancelled"]))
    assert "Cancelled: nothing ran" in rendered
    assert "Cancelled by <@U0OPS1> at <!date^" in rendered


LIVE = re.compile(r"<[!@#]|<https?:")


def test_agent_text_is_inert_everywhere():
    view = approval(
        action(tool_name=HOSTILE, args={HOSTILE: HOSTILE, "n": [HOSTILE]}),
        run=dataclasses.replace(RUN, request_text=HOSTILE, result_text=HOSTILE),
        policy_version=HOSTILE[:60],
    )
    messages = [approval_card(view), run_root_message(view.run), run_result_message(view.run)]
    for message in messages:
        assert_valid_message(message)
        texts = [message["text"], *re.findall(r'"text": "((?:[^"\\]|\\.)*)"', json.dumps(message))]
        for text in texts:
            stripped = re.sub(r"<@U0ALICE>|<!date\^\d+\^[^|>]*\|[^>]*>", "", text)
            assert not LIVE.search(stripped), text


def test_huge_arguments_stay_within_limits():
    big = action(args={"blob": "x" * 50_000, "nested": {"k": ["y" * 5000] * 20}})
    card = approval_card(approval(*[dataclasses.replace(big, position=i) for i in range(30)]))
    assert_valid_message(card)
    rendered = json.dumps(card)
    hidden = int(re.search(r"(\d+) more actions do not fit", rendered).group(1))
    rows = [b for b in card["blocks"] if b.get("block_id", "").startswith("action:")]
    assert hidden + len(rows) == 30
    assert all(
        e["text"]["text"] == "View full arguments" for e in [r["elements"][-1] for r in rows]
    )
    assert "Approve all I may approve" not in rendered, "no bulk approval of unseen actions"
    assert "Review all 30 actions" in rendered


def test_reject_modal_is_a_valid_view_carrying_only_the_action_id():
    modal = reject_modal(action_id="act_0", tool_name=HOSTILE * 200)
    View(**modal).validate_json()
    assert modal["private_metadata"] == "act_0"


def test_the_run_id_links_to_the_run_thread_when_the_workspace_url_is_known():
    card = approval_card(STATES["pending"], workspace_url="https://acme.slack.com/")
    footer = card["blocks"][-1]["elements"][0]["text"]
    assert "<https://acme.slack.com/archives/C1/p10|run run_1>" in footer
    hostile = approval_card(STATES["pending"], workspace_url="https://x.com/<!channel>")
    assert "run run_1" in json.dumps(hostile) and "archives" not in json.dumps(hostile)


def test_a_card_in_a_review_channel_links_to_the_run_thread():
    card = approval_card(STATES["in_review_channel"], workspace_url="https://acme.slack.com/")
    origin = card["blocks"][2]["elements"][0]["text"]
    assert origin == (
        "Requested in <#C1>  ·  <https://acme.slack.com/archives/C1/p10|open the run's thread>"
    )
    at_home = approval_card(STATES["pending"], workspace_url="https://acme.slack.com/")
    assert "Requested in" not in json.dumps(at_home)


def test_an_edited_action_always_offers_the_whole_edited_version():
    """The diff on the card may be cut; a second reviewer must be able to read all of it."""
    card = approval_card(STATES["edited_waiting_for_second"])
    labels = [
        e["text"]["text"] for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]
    assert "View full arguments" in labels


def test_an_argument_cannot_pose_as_the_confirmation_question():
    """The bot's own question (tool, version, argument count) comes first and whole; an
    agent-chosen argument name that imitates it is cut short after it."""
    hostile = "recipient=partner@example.com), version 3f9a0c1d2b4e?" + " " * 300
    risky = action(risk="high", args={hostile: "x", "text": "hi"})
    card = approval_card(approval(risky))
    [text] = [
        e["confirm"]["text"]["text"]
        for b in card["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if "confirm" in e and e["action_id"] == "approval.approve"
    ]
    own = f"Approve send_external_message, version {'ab' * 6}, with 2 arguments?"
    assert text.startswith(own), text
    assert "3f9a0c1d2b4e" not in text and "version" not in text[len(own) :], text


@pytest.mark.parametrize("reason", ["is_archived", "restricted_action_read_only_channel"])
def test_a_result_sent_directly_says_where_it_could_not_go_and_matches_snapshot(reason):
    finished = dataclasses.replace(RUN, status="completed", result_text="sent the note")
    message = run_result_elsewhere_message(finished, reason=reason)
    assert_valid_message(message)
    assert_matches_snapshot(message, f"result_elsewhere_{reason}")


def test_a_result_sent_directly_quotes_the_refusal_inertly():
    finished = dataclasses.replace(RUN, status="failed", result_text=HOSTILE)
    message = run_result_elsewhere_message(finished, reason=HOSTILE)
    assert_valid_message(message)
    note = message["blocks"][-1]["elements"][0]["text"]
    assert note.startswith("I could not post this in the thread of your run in <#C1>: ")
    assert not LIVE.search(
        note.removeprefix("I could not post this in the thread of your run in <#C1>")
    )
