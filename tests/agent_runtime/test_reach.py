"""Who hears of a card and how: the policy's ``notify`` and ``review_channel``, and the reach
built from it (never the requester, never who already signed off, only well-formed ids)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest
import yaml

from agent_runtime.errors import MembershipUnconfirmed, PolicyError
from agent_runtime.policy import Policy, load_policy
from agent_runtime.reach import MAX_EXPANDED, ReviewerReach
from agent_runtime.views import ActionView, ApprovalView, DecisionView, RunView

POLICY = {
    "version": "reach-unit",
    "defaults": {"notify": "mention"},
    "roles": {
        "release-managers": {"users": ["U0ALICE", "U0REL1", "bad id"], "usergroups": ["S0REL"]},
        "security": {"users": ["U0SEC1"], "notify": "dm", "review_channel": "C0SEC"},
        "ops": {"users": ["U0OPS"], "usergroups": ["S0OPS"], "notify": "dm"},
    },
    "tools": {
        "deploy": {"approvers": ["release-managers", "security"], "approvals_required": 2},
        "quiet": {"approvers": ["release-managers", "security"], "notify": "none"},
        "publish": {"approvers": ["security"], "review_channel": "G0PUBLISH"},
        "ops_task": {"approvers": ["ops"]},
        "ask_user": {"decisions": ["respond"], "approvers": ["requester"]},
    },
}
AT = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
RUN = RunView("run_1", "U0ALICE", "C0RUN", "1.0", "do it", "waiting", None)


def policy(**changes: object) -> Policy:
    return Policy.model_validate({**POLICY, **changes})


def view(tool: str, *, roles: tuple[str, ...], approved_by: tuple[str, ...] = ()) -> ApprovalView:
    action = ActionView(
        id="act_1",
        position=0,
        tool_name=tool,
        args={},
        description="",
        risk="medium",
        allowed_decisions=("approve", "reject"),
        approver_roles=roles,
        approvals_required=2,
        action_hash="h1",
        operation_id="op_1",
        outcome=None,
        decisions=tuple(
            DecisionView(reviewer_id=u, type="approve", message=None, at=AT, action_hash="h1")
            for u in approved_by
        ),
    )
    return ApprovalView(
        id="apr_1",
        run=RUN,
        status="pending",
        outcome=None,
        interrupt_id="i1",
        policy_version="reach-unit",
        requester_id="U0ALICE",
        expires_at=AT,
        card_channel="C0RUN",
        card_ts="2.0",
        actions=(action,),
    )


def groups(**members: frozenset[str]):  # type: ignore[no-untyped-def]
    def lookup(group: str) -> frozenset[str]:
        found = members.get(group)
        if found is None:
            raise MembershipUnconfirmed(group)
        return found

    return lookup


def test_notify_is_the_tools_choice_else_the_roles_else_the_default():
    p = policy()
    assert p.notify_for("deploy", "release-managers") == "mention"
    assert p.notify_for("deploy", "security") == "dm"
    assert p.notify_for("quiet", "security") == "none"
    assert policy(defaults={"notify": "none"}).notify_for("deploy", "release-managers") == "none"


def test_review_channel_is_the_tools_else_the_first_approver_role_naming_one():
    p = policy()
    assert p.review_channel_for("publish") == "G0PUBLISH"
    assert p.review_channel_for("deploy") == "C0SEC"
    assert p.review_channel_for("ops_task") is None
    assert p.review_channel_for("unnamed_tool") == "C0SEC", "an unnamed tool: every role"


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("tools", "publish", "review_channel"), "#general"),
        (("roles", "security", "review_channel"), "U0SEC1"),
        (("roles", "security", "notify"), "email"),
        (("defaults", "notify"), "loud"),
    ],
)
def test_bad_notify_or_review_channel_is_refused_naming_the_field(tmp_path: Path, where, value):
    data = yaml.safe_load(yaml.safe_dump(POLICY))
    node = data
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError, match=".".join(where)):
        load_policy(path)


def test_the_bundled_policy_mentions_by_default_and_messages_security():
    p = load_policy(None)
    assert p.defaults.notify == "mention"
    assert p.notify_for("send_external_message", "security") == "dm"


def test_reach_skips_the_requester_malformed_ids_and_who_signed_off():
    reach = ReviewerReach(policy=policy(), usergroup_members=groups(S0REL=frozenset({"U0REL2"})))
    first = reach.of(view("deploy", roles=("release-managers", "security")))
    assert first.mention.users == ("U0REL1",) and first.mention.usergroups == ("S0REL",)
    assert first.direct == ("U0SEC1",)
    later = reach.of(
        view("deploy", roles=("release-managers", "security"), approved_by=("U0SEC1",))
    )
    assert later.direct == ()


def test_a_group_holding_someone_not_to_ping_is_named_member_by_member():
    lookup = groups(S0REL=frozenset({"U0ALICE", "U0REL2", "U0REL3"}))
    reach = ReviewerReach(policy=policy(), usergroup_members=lookup)
    found = reach.of(view("deploy", roles=("release-managers",), approved_by=("U0REL2",)))
    assert found.mention.users == ("U0REL1", "U0REL3") and found.mention.usergroups == ()


def test_a_group_slack_cannot_list_or_too_large_is_mentioned_whole():
    unknown = ReviewerReach(policy=policy(), usergroup_members=groups())
    assert unknown.of(view("deploy", roles=("release-managers",))).mention.usergroups == ("S0REL",)
    crowd = frozenset({"U0ALICE", *(f"U0M{i:03d}" for i in range(MAX_EXPANDED + 1))})
    large = ReviewerReach(policy=policy(), usergroup_members=groups(S0REL=crowd))
    found = large.of(view("deploy", roles=("release-managers",)))
    assert found.mention.usergroups == ("S0REL",) and found.mention.users == ("U0REL1",)


def test_notify_dm_sends_a_group_member_by_member_and_mentions_it_when_unknown():
    listed = ReviewerReach(
        policy=policy(), usergroup_members=groups(S0OPS=frozenset({"U0OPS", "U0OPS2", "U0ALICE"}))
    )
    found = listed.of(view("ops_task", roles=("ops",)))
    assert found.direct == ("U0OPS", "U0OPS2") and not found.mention.usergroups
    unlisted = ReviewerReach(policy=policy(), usergroup_members=groups())
    found = unlisted.of(view("ops_task", roles=("ops",)))
    assert found.direct == ("U0OPS",) and found.mention.usergroups == ("S0OPS",)


def test_nobody_for_notify_none_decided_actions_or_the_requester_role():
    reach = ReviewerReach(policy=policy(), usergroup_members=groups(S0REL=frozenset()))
    assert not reach.of(view("quiet", roles=("release-managers", "security")))
    assert not reach.of(view("ask_user", roles=("requester",)))
    decided = view("deploy", roles=("release-managers",))
    done = dataclasses.replace(decided.actions[0], outcome="approved")
    assert not reach.of(dataclasses.replace(decided, actions=(done,)))
    assert not reach.of(decided, action_ids=("act_other",))
