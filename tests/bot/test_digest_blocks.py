"""The digest builder: a snapshot of each state, slack_sdk validation, Slack's 50 blocks,
buttons bound to the version shown, agent text inert."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from agent_runtime.recording import MAX_DIGEST_ACTIONS
from agent_runtime.views import DecisionView, DigestView
from bot.blocks.digest import MAX_ITEMS, digest_message
from tests.bot.snapshot_files import assert_matches_snapshot
from tests.bot.test_blocks import (
    AT,
    HOSTILE,
    LIVE,
    action,
    approval,
    assert_valid_message,
)

APPROVED = DecisionView(
    reviewer_id="U0REL1", type="approve", message=None, at=AT, action_hash="ab" * 32
)
FIRST = approval(action(0, id="act_a"), id="apr_a", card_channel=None, card_ts=None)
SECOND = approval(
    action(0, id="act_b", args={"recipient": "b@example.com", "text": "second"}),
    id="apr_b",
    requester_id="U0BOB",
    card_channel=None,
    card_ts=None,
)


def digest(*approvals) -> DigestView:  # type: ignore[no-untyped-def]
    return DigestView(id="dig_1", channel="C1", ts="3.0", approvals=approvals)


STATES = {
    "pending": digest(FIRST, SECOND),
    "one_approved": digest(
        dataclasses.replace(
            FIRST,
            status="resolved",
            actions=(action(0, id="act_a", outcome="approved", decisions=(APPROVED,)),),
        ),
        SECOND,
    ),
    "expired_and_cancelled": digest(
        dataclasses.replace(
            FIRST, status="expired", actions=(action(0, id="act_a", outcome="expired"),)
        ),
        dataclasses.replace(SECOND, status="cancelled"),
    ),
}


@pytest.mark.parametrize("state", sorted(STATES))
def test_digest_matches_snapshot_and_validates(state):
    message = digest_message(STATES[state])
    assert_valid_message(message)
    assert_matches_snapshot(message, f"digest_{state}")


def _values(message) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [
        (e["action_id"], e["value"])
        for b in message["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    ]


def test_each_open_row_has_approve_and_reject_naming_the_action_and_its_version():
    version = "ab" * 32
    assert _values(digest_message(STATES["pending"])) == [
        ("digest.approve", f"act_a:{version}"),
        ("approval.reject", f"act_a:{version}"),
        ("digest.approve", f"act_b:{version}"),
        ("approval.reject", f"act_b:{version}"),
    ]
    assert _values(digest_message(STATES["one_approved"])) == [
        ("digest.approve", f"act_b:{version}"),
        ("approval.reject", f"act_b:{version}"),
    ]
    assert _values(digest_message(STATES["expired_and_cancelled"])) == []
    rendered = json.dumps(digest_message(STATES["one_approved"]))
    assert "<@U0REL1> approved at <!date^" in rendered


def _decisions(message):  # type: ignore[no-untyped-def]
    """Approve and Reject buttons (a long row also offers View full arguments)."""
    return [v for v in _values(message) if v[0] != "approval.view_args"]


def test_the_largest_digest_the_engine_posts_fits_and_more_rows_are_counted_not_dropped():
    assert MAX_DIGEST_ACTIONS <= MAX_ITEMS
    many = [
        approval(action(0, id=f"act_{i}", args={"blob": "x" * 5000}), id=f"apr_{i}")
        for i in range(30)
    ]
    full = digest_message(digest(*many[:MAX_DIGEST_ACTIONS]))
    assert_valid_message(full)
    assert len(_decisions(full)) == 2 * MAX_DIGEST_ACTIONS
    over = digest_message(digest(*many))
    assert_valid_message(over)  # at most 50 blocks, each valid
    shown = len(_decisions(over)) // 2
    hidden = int(re.search(r"(\d+) more action\(s\) do not fit", json.dumps(over)).group(1))
    assert shown + hidden == 30


def test_agent_text_in_a_digest_is_inert():
    hostile = approval(
        action(tool_name=HOSTILE, args={HOSTILE: HOSTILE, "n": [HOSTILE]}), requester_id="U0ALICE"
    )
    decided = dataclasses.replace(
        hostile,
        status="resolved",
        actions=(
            action(
                outcome="rejected",
                decisions=(
                    DecisionView(reviewer_id="U0SEC1", type="reject", message=HOSTILE, at=AT),
                ),
            ),
        ),
    )
    for view in (hostile, decided):
        message = digest_message(digest(view))
        assert_valid_message(message)
        texts = [message["text"], *re.findall(r'"text": "((?:[^"\\]|\\.)*)"', json.dumps(message))]
        for text in texts:
            stripped = re.sub(r"<@U0(ALICE|SEC1)>|<!date\^\d+\^[^|>]*\|[^>]*>", "", text)
            assert not LIVE.search(stripped), text


def _elements(message) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_a_row_that_cuts_its_arguments_short_offers_all_of_them():
    """Approve binds the whole call: a row showing part of it offers the rest, as a card does."""
    long_args = {"text": "Quarterly numbers attached. " * 15, "bcc": "attacker@evil.example"}
    cut = digest_message(digest(approval(action(0, args=long_args), id="apr_1")))
    assert "attacker@evil.example" not in json.dumps(cut)  # not on the row itself
    [view] = [e for e in _elements(cut) if e["action_id"] == "approval.view_args"]
    assert view["value"] == "act_0"
    short = digest_message(digest(approval(action(0, args={"to": "a@example.com"}), id="apr_1")))
    assert all(e["action_id"] != "approval.view_args" for e in _elements(short))
