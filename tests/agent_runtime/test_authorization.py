"""Every refusal reason, table-driven."""

from __future__ import annotations

import datetime as dt

import pytest

from agent_runtime.authorization import ActionFacts, Actor, Refusal, check_decision, outcome_after
from agent_runtime.policy import Policy, load_policy

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


TEAMS_POLICY = Policy.model_validate(
    {
        "version": "teams-1",
        "roles": {"release-managers": {"users": ["U0REL1"]}, "security": {}},
        "teams": {"T0BETA": {"roles": {"release-managers": {"users": ["U0BRAVI"]}}}},
        "tools": {"send_external_message": {"approvers": ["release-managers"]}},
    }
)


@pytest.mark.parametrize(
    ("team", "actor", "expected"),
    [
        # each workspace's reviewers decide in their own workspace only
        ("T0ACME", Actor("U0REL1", "T0ACME"), None),
        ("T0BETA", Actor("U0BRAVI", "T0BETA"), None),
        ("T0ACME", Actor("U0BRAVI", "T0BETA"), Refusal.OTHER_WORKSPACE),
        ("T0BETA", Actor("U0REL1", "T0ACME"), Refusal.OTHER_WORKSPACE),
        # a workspace's section replaces the role there: the top-level people hold it no more
        ("T0BETA", Actor("U0REL1", "T0BETA"), Refusal.NOT_AN_APPROVER),
        ("T0ACME", Actor("U0BRAVI", "T0ACME"), Refusal.NOT_AN_APPROVER),
    ],
)
def test_two_workspaces_each_with_its_own_reviewers(team, actor, expected):
    refusal = check_decision(
        TEAMS_POLICY,
        facts(team_id=team),
        actor,
        "approve",
        now=NOW,
        usergroup_members=no_groups,
    )
    assert refusal is expected
