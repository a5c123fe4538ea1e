"""The approval policy end to end: dual sign-off, vetoes, user groups, `when`, expiry, reminders."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_runtime.authorization import Refusal
from bot.errors import REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_models import AuditEvent
from store.models import utcnow
from tests.bot.flows import button, card_now, ephemeral_for, result_message, start_run

POLICY = """
version: "test-1"
defaults: {expires_after: 1h, remind_after: 30m, escalation_channel: C0ESCAL}
roles:
  release-managers: {users: [U0REL1, U0REL2], usergroups: [S0RELMGR]}
  security: {users: [U0SEC1]}
tools:
  publish_report:
    risk: high
    decisions: [approve, reject]
    approvers: [release-managers]
    approvals_required: 2
    when: {channel: public}
  send_external_message: {decisions: [approve, reject], approvers: [release-managers]}
"""
PUBLISH_PUBLIC = 'publish_report {"path": "reports/weekly.md", "channel": "public"}'
PUBLISH_INTERNAL = 'publish_report {"path": "reports/weekly.md", "channel": "internal"}'
SEND = 'send_external_message {"recipient": "partner@example.com", "text": "hi"}'


class FakeClock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def h(serve_bot, sqlite_url, policy_file, clock):  # type: ignore[no-untyped-def]
    return serve_bot(sqlite_url, clock=clock, policy_file=policy_file)


def effects(h) -> list[str]:  # type: ignore[no-untyped-def]
    return [e["tool"] for e in h.workspace.effects()]


def audit_kinds(h) -> list[str]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(AuditEvent.kind).order_by(AuditEvent.id)))


def test_dual_sign_off_needs_two_distinct_eligible_reviewers(h):
    root, card = start_run(h, PUBLISH_PUBLIC)
    approve = button(card, "Approve")

    h.driver.click(user=people.REQUESTER, message=card, button=approve)
    assert ephemeral_for(h, people.REQUESTER) == REFUSALS["self_approval"]

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    h.state.wait_for(lambda: "1 of 2 approvals" in json.dumps(card_now(h, card).blocks))
    progress = json.dumps(card_now(h, card).blocks)
    assert "Waiting for another reviewer from release-managers" in progress
    assert f"not <@{people.REQUESTER}>, who asked, nor <@{people.RELEASE_MANAGER}>" in progress

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS["already_approved"]
    assert effects(h) == [], "one distinct reviewer is not enough"

    h.driver.click(user=people.GROUP_ONLY, message=card, button=approve)  # via S0RELMGR
    result_message(h, root)
    assert effects(h) == ["publish_report"]
    assert audit_kinds(h).count("resumed") == 1
    assert buttons(card_now(h, card)) == []


def test_one_eligible_reject_is_a_veto(h):
    root, card = start_run(h, PUBLISH_PUBLIC)
    approve, reject = button(card, "Approve"), button(card, "Reject")
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    h.state.wait_for(lambda: "1 of 2 approvals" in json.dumps(card_now(h, card).blocks))
    h.driver.click(user=people.RELEASE_MANAGER_2, message=card, button=reject)
    modal = h.state.wait_for(lambda: h.state.open_views(people.RELEASE_MANAGER_2))[-1]
    h.driver.submit_view(
        user=people.RELEASE_MANAGER_2, view_id=modal.id, values={"reject_reason": {"reason": "no"}}
    )
    assert "rejected" in result_message(h, root).text
    assert effects(h) == []


def test_non_member_of_the_group_is_refused(h):
    _root, card = start_run(h, PUBLISH_PUBLIC)
    h.driver.click(user=people.OUTSIDER, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.OUTSIDER) == REFUSALS["not_an_approver"]
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.SECURITY) == REFUSALS["not_an_approver"]


def test_when_exempt_call_runs_without_a_card(h):
    root, _ = start_run_without_card(h, PUBLISH_INTERNAL)
    result = result_message(h, root)
    assert "published reports/weekly.md to internal" in result.text
    assert effects(h) == ["publish_report"]
    assert not any(buttons(m) for m in h.state.thread(people.CHANNEL, root.ts))
    with h.bot.db.transaction() as s:
        recorded = s.scalars(
            select(AuditEvent).where(AuditEvent.kind == "interrupt_recorded")
        ).one()
    assert recorded.detail["actions"][0]["exempt"] is True


def start_run_without_card(h, text):  # type: ignore[no-untyped-def]
    h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=text)
    root = h.state.wait_for(lambda: next(iter(h.state.top_level(people.CHANNEL)), None))
    return root, None


def test_expiry_rejects_fail_closed_and_says_so(h, clock):
    root, card = start_run(h, SEND)
    approve = button(card, "Approve")
    clock.advance(minutes=61)
    assert h.bot.engine.sweep().expired == 1

    result = result_message(h, root)
    assert "approval expired" in result.text
    assert effects(h) == []
    expired_card = json.dumps(card_now(h, card).blocks)
    assert "Expired: treated as rejected" in expired_card and buttons(card_now(h, card)) == []
    thread = [m.text for m in h.state.thread(people.CHANNEL, root.ts)]
    assert any("before it expired" in t for t in thread)
    assert h.bot.engine.sweep().expired == 0, "a request expires once"

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS["already_decided"]
    assert effects(h) == []


def test_click_after_expiry_time_before_the_sweep_is_refused(h, clock):
    _root, card = start_run(h, SEND)
    clock.advance(minutes=61)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS["expired"]
    assert effects(h) == []


def test_one_reminder_mentions_eligible_reviewers_and_escalates(h, clock):
    root, _card = start_run(h, PUBLISH_PUBLIC)
    assert h.bot.engine.sweep().reminded == 0
    clock.advance(minutes=31)
    assert h.bot.engine.sweep().reminded == 1
    assert h.bot.engine.sweep().reminded == 0, "one reminder only"

    reminder = next(m for m in h.state.thread(people.CHANNEL, root.ts) if "Reminder" in m.text)
    assert f"<@{people.RELEASE_MANAGER}>" in reminder.text
    assert "<!subteam^S0RELMGR>" in reminder.text
    assert f"<@{people.REQUESTER}>" not in reminder.text
    escalated = h.state.top_level("C0ESCAL")
    assert len(escalated) == 1 and "still waiting" in escalated[0].text


def test_group_membership_follows_subteam_events(h):
    _root, card = start_run(h, PUBLISH_PUBLIC)
    assert h.bot.services.directory.members("S0RELMGR") >= {people.GROUP_ONLY}
    h.state.change(lambda: h.state.usergroups["S0RELMGR"].remove(people.GROUP_ONLY))
    reply = h.driver.event(
        {
            "type": "subteam_members_changed",
            "subteam_id": "S0RELMGR",
            "removed_users": [people.GROUP_ONLY],
        }
    )
    assert reply.status == 200
    h.driver.click(user=people.GROUP_ONLY, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.GROUP_ONLY) == REFUSALS["not_an_approver"]


def test_free_plan_user_groups_degrade_to_user_ids(serve_bot, sqlite_url, policy_file):
    h = serve_bot(sqlite_url, policy_file=policy_file)
    h.sandbox.plan_gated = True
    root, card = start_run(h, SEND)
    h.driver.click(user=people.GROUP_ONLY, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.GROUP_ONLY) == REFUSALS["not_an_approver"]
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert effects(h) == ["send_external_message"]


def test_only_listed_requesters_may_start_runs(serve_bot, sqlite_url, tmp_path):
    path = tmp_path / "requesters.yaml"
    path.write_text(POLICY + "requesters: [release-managers]\n")
    h = serve_bot(sqlite_url, policy_file=path)
    reply = h.driver.slash_command(user=people.OUTSIDER, channel=people.CHANNEL, text=SEND)
    assert reply.status == 200
    told = h.state.wait_for(lambda: list(h.state.responses))
    assert "not allowed to start agent runs" in told[0]["text"]
    assert h.state.top_level(people.CHANNEL) == []
    with h.bot.db.transaction() as s:
        refused = s.scalars(select(AuditEvent).where(AuditEvent.kind == "run_refused")).one()
    assert refused.actor_id == people.OUTSIDER


def test_user_groups_fail_closed_when_slack_cannot_confirm_membership(h):
    """A member removed from the group while the cached list has expired and Slack answers
    ``ratelimited`` must not approve on the strength of what the bot knew before."""
    _root, card = start_run(h, PUBLISH_PUBLIC)
    directory = h.bot.services.directory
    assert people.GROUP_ONLY in directory.members("S0RELMGR")  # cached
    h.state.change(lambda: h.state.usergroups["S0RELMGR"].remove(people.GROUP_ONLY))
    directory.ttl = 0  # the cached list has expired
    h.sandbox.failing["usergroups.users.list"] = "ratelimited"

    h.driver.click(user=people.GROUP_ONLY, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.GROUP_ONLY) == REFUSALS[Refusal.MEMBERSHIP_UNCONFIRMED]
    with h.bot.db.transaction() as s:
        refused = s.scalars(select(AuditEvent).where(AuditEvent.kind == "decision_refused")).all()
    assert [e.reason for e in refused] == ["membership_unconfirmed"]
    assert "1 of 2 approvals" not in json.dumps(card_now(h, card).blocks)

    # A reviewer named by user id is not held up by the group look-up.
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    h.state.wait_for(lambda: "1 of 2 approvals" in json.dumps(card_now(h, card).blocks))
