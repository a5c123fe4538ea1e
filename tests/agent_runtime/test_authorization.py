"""Every refusal reason, table-driven."""

from __future__ import annotations

import datetime as dt

import pytest

from agent_runtime.authorization import ActionFacts, Actor, Refusal, check_decision, outcome_after
from agent_runtime.policy import load_policy

NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
POLICY = load_policy(None)


def facts(**changes: object) -> ActionFacts:
    base = {
        "request_status": "pending",
        "team_id": "T1",
        "requester_id": "U0ALICE",
        "expires_at": NOW + dt.timedelta(hours=1),
        "outcome": None,
        "allowed_decisions": ("approve", "reject"),
        "approver_roles": ("release-managers",),
        "self_approval": False,
        "approvers_so_far": frozenset(),
    }
    return ActionFacts(**{**base, **changes})  # type: ignore[arg-type]


def no_groups(_group: str) -> frozenset[str]:
    return frozenset()


@pytest.mark.parametrize(
    ("fact_changes", "actor", "decision", "expected"),
    [
        ({}, Actor("U0REL1", "T1"), "approve", None),
        ({}, Actor("U0REL1", "T1"), "reject", None),
        ({}, Actor("U0REL1", "T2"), "approve", Refusal.OTHER_WORKSPACE),
        ({"request_status": "resuming"}, Actor("U0REL1", "T1"), "approve", Refusal.ALREADY_DECIDED),
        ({"outcome": "approved"}, Actor("U0REL1", "T1"), "approve", Refusal.ALREADY_DECIDED),
        ({"expires_at": NOW}, Actor("U0REL1", "T1"), "approve", Refusal.EXPIRED),
        ({}, Actor("U0SEC1", "T1"), "approve", Refusal.NOT_AN_APPROVER),
        ({}, Actor("U0ALICE", "T1"), "approve", Refusal.SELF_APPROVAL),
        # self_approval lifts the ban on one's own run, not the need for an approver role
        (
            {"self_approval": True, "approver_roles": ()},
            Actor("U0ALICE", "T1"),
            "approve",
            Refusal.NOT_AN_APPROVER,
        ),
        ({"self_approval": True, "requester_id": "U0REL1"}, Actor("U0REL1", "T1"), "approve", None),
        (
            {"self_approval": True, "approver_roles": ("security",)},
            Actor("U0ALICE", "T1"),
            "approve",
            Refusal.NOT_AN_APPROVER,
        ),
        ({"approver_roles": ("requester",)}, Actor("U0ALICE", "T1"), "approve", None),
        ({}, Actor("U0REL1", "T1"), "respond", Refusal.DECISION_NOT_ALLOWED),
        (
            {"approvers_so_far": frozenset({"U0REL1"})},
            Actor("U0REL1", "T1"),
            "approve",
            Refusal.ALREADY_APPROVED,
        ),
    ],
)
def test_check_decision(fact_changes, actor, decision, expected):
    refusal = check_decision(
        POLICY, facts(**fact_changes), actor, decision, now=NOW, usergroup_members=no_groups
    )
    assert refusal == expected


@pytest.mark.parametrize(
    ("decision", "distinct", "required", "expected"),
    [
        ("reject", 0, 2, "rejected"),
        ("approve", 1, 2, None),
        ("approve", 2, 2, "approved"),
        ("approve", 1, 1, "approved"),
        ("respond", 0, 1, "responded"),
    ],
)
def test_outcome_after(decision, distinct, required, expected):
    assert (
        outcome_after(decision, distinct_approvers=distinct, approvals_required=required)
        == expected
    )
