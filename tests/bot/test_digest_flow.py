"""Medium risk reviewed in batches, end to end over signed HTTP: no card when recorded, one
digest per channel once the oldest has waited, Approve / Reject per row through the same
decision path as cards, the digest redrawn from the store; high risk still gets its card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.errors import REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import Button, buttons
from bot.sandbox.state import Message
from store.audit_models import AuditEvent
from store.display_models import DigestMessage
from store.models import Action, ApprovalRequest, Decision, Run
from tests.bot.flows import DELETE, cards_in, ephemeral_for, open_modal, result_message, start_run
from tests.bot.test_approvals_home import _home, _sections
from tests.bot.test_policy_flow import FakeClock
from tests.conftest import Harness

POLICY = """
version: "digest-1"
defaults: {expires_after: 4h, remind_after: 3h}
digest: {risks: [medium], every: 1h}
roles:
  release-managers: {users: [U0REL1, U0REL2], usergroups: [S0RELMGR]}
  security: {users: [U0SEC1]}
tools:
  send_external_message:
    risk: medium
    decisions: [approve, reject]
    approvers: [release-managers, security]
  delete_project_file:
    risk: high
    decisions: [approve, reject]
    approvers: [release-managers, security]
"""
SEND_A = 'send_external_message {"recipient": "a@example.com", "text": "<!channel> hi"}'
SEND_B = 'send_external_message {"recipient": "b@example.com", "text": "second"}'


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def h(serve_bot, sqlite_url, tmp_path: Path, clock):  # type: ignore[no-untyped-def]
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return serve_bot(sqlite_url, clock=clock, policy_file=path)


def start_waiting(h: Harness, text: str) -> Message:
    """Slash command -> the run's root message, once the run waits on its approval."""
    before = {m.ts for m in h.state.top_level(people.CHANNEL)}
    reply = h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=text)
    assert reply.status == 200, reply
    root = h.state.wait_for(
        lambda: next((m for m in h.state.top_level(people.CHANNEL) if m.ts not in before), None)
    )

    # A digested request posts nothing to wait for in Slack: wait for the bot to be idle.
    assert h.bot.settle(timeout=60) and all_waiting(h)
    return root


def all_waiting(h: Harness) -> bool:
    with h.bot.db.transaction() as s:
        statuses = list(s.scalars(select(Run.status)))
    return bool(statuses) and all(status == "waiting" for status in statuses)


def digests(h: Harness) -> list[Message]:
    return [
        m
        for m in h.state.top_level(people.CHANNEL)
        if (m.metadata or {}).get("event_type") == "approval_digest"
    ]


def rows(message: Message, label: str) -> list[Button]:
    return [b for b in buttons(message) if b.text == label and b.block_id.startswith("digest:")]


def row_of(h: Harness, digest: Message, label: str, root: Message) -> Button:
    """The row of the run started by ``root`` (rows are in request order, and two requests
    made in the same instant have no order of their own)."""
    for candidate in rows(digest, label):
        action_id = candidate.value.split(":")[0]
        with h.bot.db.transaction() as s:
            thread = s.scalar(
                select(Run.thread_ts)
                .join(ApprovalRequest, ApprovalRequest.run_id == Run.id)
                .join(Action, Action.request_id == ApprovalRequest.id)
                .where(Action.id == action_id)
            )
        if thread == root.ts:
            return candidate
    raise AssertionError(f"no {label} row for the run of {root.ts}")


def count(h: Harness, model: type) -> int:
    with h.bot.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_two_medium_requests_are_reviewed_in_one_digest(h, clock):
    root_a = start_waiting(h, SEND_A)
    root_b = start_waiting(h, SEND_B)
    assert cards_in(h.state, root_a) == [] and cards_in(h.state, root_b) == [], "no cards"
    assert h.bot.engine.sweep().digests == 0, "not before the oldest has waited an hour"
    assert digests(h) == []

    clock.advance(minutes=61)
    assert h.bot.engine.sweep().digests == 1
    assert h.bot.engine.sweep().digests == 0, "each request is listed once"
    [digest] = digests(h)
    approve_a, approve_b = (row_of(h, digest, "Approve", root) for root in (root_a, root_b))
    assert len(rows(digest, "Reject")) == 2
    rendered = json.dumps(digest.blocks)
    assert "&lt;!channel&gt;" in rendered and "<!channel>" not in rendered, "agent text inert"
    assert f"requested by <@{people.REQUESTER}>" in rendered

    # A version the row never showed is refused, and nothing is recorded.
    action_a = approve_a.value.split(":")[0]
    forged = Button(approve_a.block_id, approve_a.action_id, f"{action_a}:{'0' * 64}", "Approve")
    h.driver.click(user=people.RELEASE_MANAGER, message=digest, button=forged)
    assert "changed since you saw it" in ephemeral_for(h, people.RELEASE_MANAGER)
    # The requester may not approve their own request from the digest either.
    h.driver.click(user=people.REQUESTER, message=digest, button=approve_a)
    assert ephemeral_for(h, people.REQUESTER) == REFUSALS["self_approval"]
    assert count(h, Decision) == 0

    h.driver.click(user=people.RELEASE_MANAGER, message=digest, button=approve_a)
    result = result_message(h, root_a)
    assert "a@example.com" in result.text
    redrawn = h.state.wait_for(
        lambda: (m := h.state.current(digest)) and len(rows(m, "Approve")) == 1 and m
    )
    assert rows(redrawn, "Approve")[0].value == approve_b.value, "the other item stays open"
    assert f"<@{people.RELEASE_MANAGER}> approved" in json.dumps(redrawn.blocks)
    assert cards_in(h.state, root_a) == [], "the digest never becomes a card"
    with h.bot.db.transaction() as s:
        assert list(s.scalars(select(ApprovalRequest.card_ts))) == [None, None]

    # A second click on the old row changes nothing: the run resumed once.
    h.driver.click(user=people.RELEASE_MANAGER_2, message=digest, button=approve_a)
    assert ephemeral_for(h, people.RELEASE_MANAGER_2) == REFUSALS["already_decided"]
    assert [e["recipient"] for e in h.workspace.effects()] == ["a@example.com"]
    with h.bot.db.transaction() as s:
        refused = list(s.scalars(select(AuditEvent.reason).where(AuditEvent.outcome == "refused")))
    assert refused == ["stale_version", "self_approval", "already_decided"]
    assert count(h, DigestMessage) == 1


def test_reject_from_the_digest_asks_a_reason_and_the_row_says_who(h, clock):
    root = start_waiting(h, SEND_B)
    clock.advance(minutes=61)
    h.bot.engine.sweep()
    [digest] = digests(h)
    h.driver.click(user=people.SECURITY, message=digest, button=rows(digest, "Reject")[0])
    modal = h.state.wait_for(lambda: h.state.open_views(people.SECURITY))[-1]
    h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"reject_reason": {"reason": "not now"}}
    )
    assert "not now" in result_message(h, root).text
    redrawn = h.state.wait_for(lambda: (m := h.state.current(digest)) and not buttons(m) and m)
    rendered = json.dumps(redrawn.blocks)
    assert f"<@{people.SECURITY}> rejected" in rendered and "Rejected" in rendered
    assert h.workspace.effects() == []


def test_high_risk_still_gets_its_card_and_an_expired_item_shows_expired(h, clock):
    _root, card = start_run(h, DELETE)
    assert [b.text for b in buttons(card)][:2] == ["Approve", "Reject"]
    start_waiting(h, SEND_B)
    clock.advance(minutes=61)
    assert h.bot.engine.sweep().digests == 1
    [digest] = digests(h)
    assert len(rows(digest, "Approve")) == 1, "only the medium-risk request is listed"

    clock.advance(hours=3)
    assert h.bot.engine.sweep().expired == 2
    redrawn = h.state.wait_for(lambda: (m := h.state.current(digest)) and not buttons(m) and m)
    assert "Expired" in json.dumps(redrawn.blocks)


def digest_post(args: dict) -> bool:  # type: ignore[type-arg]
    return (args.get("metadata") or {}).get("event_type") == "approval_digest"


@pytest.mark.parametrize(
    "lost",
    [{"error": "internal_error", "takes_effect": True}, {"drop": True}],
    ids=["answered_with_an_error", "connection_dropped"],
)
def test_a_digest_slack_took_whose_answer_was_lost_is_found_not_posted_again(h, clock, lost):
    root = start_waiting(h, SEND_B)
    h.sandbox.misbehave("chat.postMessage", match=digest_post, **lost)
    clock.advance(minutes=61)
    assert h.bot.engine.sweep().digests == 0, "the bot never heard where it went"
    [digest] = digests(h)
    assert h.bot.engine.reconcile().digests == 0, "its poster's lease still holds"
    clock.advance(minutes=2)
    h.bot.engine.reconcile()
    clock.advance(minutes=2)
    h.bot.engine.reconcile()
    assert [m.ts for m in digests(h)] == [digest.ts], "the digest was posted twice"
    h.driver.click(user=people.RELEASE_MANAGER, message=digest, button=rows(digest, "Approve")[0])
    result_message(h, root)
    h.state.wait_for(lambda: not buttons(h.state.current(digest)) or None)


def test_a_row_cut_short_shows_the_whole_call_from_the_digest(h, clock):
    """The Approve of a row binds the whole call; a row that shows part of it opens the rest
    for anyone who sees the digest, as a card does."""
    text = "Quarterly numbers attached. " * 15
    long_send = json.dumps({"recipient": "c@example.com", "text": text + "P.S. bcc the board"})
    start_waiting(h, f"send_external_message {long_send}")
    clock.advance(minutes=61)
    assert h.bot.engine.sweep().digests == 1
    [digest] = digests(h)
    assert "bcc the board" not in json.dumps(digest.blocks)
    view = open_modal(h, people.RELEASE_MANAGER, digest, "View full arguments")
    assert "bcc the board" in json.dumps(view.view)


def test_a_decision_in_a_digest_refreshes_the_home_tab(h, clock):
    """A digested approval is on its reviewers' Home tabs like a card's, and leaves "Waiting
    on you" once decided from the digest."""
    root = start_waiting(h, SEND_A)
    clock.advance(minutes=61)
    assert h.bot.engine.sweep().digests == 1
    [digest] = digests(h)
    with h.bot.db.transaction() as s:
        request_id = s.scalars(select(ApprovalRequest.id)).one()
    h.driver.open_home(user=people.RELEASE_MANAGER_2)
    assert request_id in _sections(_home(h, people.RELEASE_MANAGER_2))["Waiting on you"]

    h.driver.click(user=people.RELEASE_MANAGER, message=digest, button=rows(digest, "Approve")[0])
    result_message(h, root)
    h.state.wait_for(
        lambda: (
            (v := h.state.home_of(people.RELEASE_MANAGER_2))
            and request_id not in _sections(v)["Waiting on you"]
        )
    )
