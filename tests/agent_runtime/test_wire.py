from __future__ import annotations

import pytest
from langgraph.types import Interrupt

from agent_runtime.errors import InvalidDecisions, UnsupportedInterrupt
from agent_runtime.wire import (
    ResumeDecision,
    action_hash,
    build_resume,
    parse_interrupt,
    tool_call_ids,
)

BATCH = Interrupt(
    value={
        "action_requests": [
            {"name": "publish_report", "args": {"path": "a.md"}, "description": "d1"},
            {"name": "send_external_message", "args": {"recipient": "x"}, "description": "d2"},
        ],
        "review_configs": [
            {"action_name": "publish_report", "allowed_decisions": ["approve", "reject"]},
            {"action_name": "send_external_message", "allowed_decisions": ["approve", "edit"]},
        ],
    },
    id="int-1",
)


def test_parse_batch_keeps_order_and_allowed_decisions():
    pending = parse_interrupt(BATCH)
    assert pending.kind == "hitl_batch"
    assert [a.name for a in pending.actions] == ["publish_report", "send_external_message"]
    assert pending.actions[1].allowed_decisions == ("approve", "edit")


def test_parse_per_call_tool_approval():
    item = Interrupt(
        value={
            "type": "tool_approval",
            "tool_call_id": "c1",
            "name": "t",
            "args": {"a": 1},
            "description": "x",
        },
        id="int-2",
    )
    pending = parse_interrupt(item)
    assert (pending.kind, pending.actions[0].tool_call_id) == ("tool_approval", "c1")
    command = build_resume(pending, [ResumeDecision(type="approve")])
    assert command.resume == {"int-2": {"type": "approve"}}


@pytest.mark.parametrize(
    "value",
    [
        "just text",
        {"kind": "custom"},
        {"action_requests": [], "review_configs": []},
        {"action_requests": [{"name": "x", "args": {}}], "review_configs": []},
    ],
)
def test_unknown_interrupts_are_refused(value):
    with pytest.raises(UnsupportedInterrupt):
        parse_interrupt(Interrupt(value=value, id="i"))


def test_build_resume_for_batch_is_keyed_by_interrupt_id():
    command = build_resume(
        parse_interrupt(BATCH),
        [
            ResumeDecision(type="approve"),
            ResumeDecision(type="edit", edited_args={"recipient": "y"}),
        ],
    )
    assert command.resume == {
        "int-1": {
            "decisions": [
                {"type": "approve"},
                {
                    "type": "edit",
                    "edited_action": {"name": "send_external_message", "args": {"recipient": "y"}},
                },
            ]
        }
    }


@pytest.mark.parametrize(
    "decisions",
    [
        [ResumeDecision(type="approve")],  # wrong count
        [
            ResumeDecision(type="edit", edited_args={}),
            ResumeDecision(type="approve"),
        ],  # not allowed
        [ResumeDecision(type="approve"), ResumeDecision(type="reject")],  # not allowed
        [ResumeDecision(type="approve"), ResumeDecision(type="edit")],  # edit without args
    ],
)
def test_invalid_decisions_never_become_a_command(decisions):
    with pytest.raises(InvalidDecisions):
        build_resume(parse_interrupt(BATCH), decisions)


def test_action_hash_binds_name_args_and_policy_version():
    base = action_hash("t", {"a": 1, "b": [1, 2]}, "v1")
    assert base == action_hash("t", {"b": [1, 2], "a": 1}, "v1")
    assert base != action_hash("t", {"a": 2, "b": [1, 2]}, "v1")
    assert base != action_hash("u", {"a": 1, "b": [1, 2]}, "v1")
    assert base != action_hash("t", {"a": 1, "b": [1, 2]}, "v2")


def test_tool_call_ids_match_batch_actions_in_order():
    class Msg:
        tool_calls = [
            {"name": "send_external_message", "args": {"recipient": "x"}, "id": "c2"},
            {"name": "publish_report", "args": {"path": "a.md"}, "id": "c1"},
        ]

    assert tool_call_ids([Msg()], parse_interrupt(BATCH)) == ["c1", "c2"]


def test_a_call_is_matched_to_its_review_whether_its_lists_are_tuples_or_lists():
    """The model's call as the run holds it may carry tuples; the review read back from the
    checkpoint carries lists (its serializer keeps no tuple). They are the same call."""

    class Msg:
        tool_calls = [{"name": "send", "args": {"to": ("a", "b")}, "id": "c1"}]

    review = Interrupt(
        value={
            "action_requests": [{"name": "send", "args": {"to": ["a", "b"]}}],
            "review_configs": [{"action_name": "send", "allowed_decisions": ["approve"]}],
        },
        id="int-2",
    )
    assert tool_call_ids([Msg()], parse_interrupt(review)) == ["c1"]


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_arguments_json_cannot_hold_are_refused_as_unreviewable(number):
    """NaN and Infinity are not JSON: they could be neither stored nor shown as proposed."""
    item = Interrupt(
        value={
            "action_requests": [
                {"name": "pay_invoice", "args": {"amount": {"eur": [1, number]}}, "description": ""}
            ],
            "review_configs": [{"action_name": "pay_invoice", "allowed_decisions": ["approve"]}],
        },
        id="int-nan",
    )
    with pytest.raises(UnsupportedInterrupt, match=r"pay_invoice.*NaN or Infinity"):
        parse_interrupt(item)
