"""Recording an interrupt: decisions both sides allow, operation ids, normalized arguments."""

from __future__ import annotations

from agent_runtime.recording import allowed_decisions, operation_id


def test_decisions_are_what_both_the_graph_and_the_policy_allow():
    assert allowed_decisions(("approve", "edit", "reject"), ("approve", "reject")) == [
        "approve",
        "reject",
    ]


def test_when_graph_and_policy_share_nothing_only_a_reject_is_left():
    """Fail closed: never fall back to what the graph alone offers."""
    assert allowed_decisions(("approve", "edit", "reject"), ("respond",)) == ["reject"]
    assert allowed_decisions(("approve", "edit"), ("respond",)) == []


def test_identical_calls_get_distinct_operation_ids():
    args = {"recipient": "a@example.com", "text": "hi"}
    first, second = operation_id("run", "send", args, 0), operation_id("run", "send", args, 1)
    assert first != second
    assert first == operation_id("run", "send", dict(reversed(args.items())), 0), "canonical"
