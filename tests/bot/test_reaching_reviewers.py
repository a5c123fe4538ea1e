"""Reaching reviewers end to end: pings under the card, direct messages, sign-off follow-ups,
inert agent text, and cards posted in a review channel."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.state import Message
from store.audit_models import AuditEvent
from tests.bot.flows import (
    FINAL_HEADER,
    button,
    card_header,
    card_now,
    open_modal,
    result_message,
    start_run,
)
from tests.conftest import Harness

POLICY = """
version: "reach-1"
defaults: {expires_after: 1h, remind_after: null}
roles:
  release-managers: {users: [U0ALICE, U0REL1, U0REL2], usergroups: [S0RELMGR]}
  security: {users: [U0SEC1], notify: dm}
tools:
  send_external_message:
    decisions: [approve, reject]
    approvers: [release-managers, security]
    self_approval: true
  publish_report:
    decisions: [approve, reject]
    approvers: [release-managers]
    approvals_required: 2
  delete_project_file:
    decisions: [approve, reject]
    approvers: [release-managers, security]
    notify: none
"""
REVIEW_POLICY = """
version: "reach-2"
defaults: {expires_after: 1h, remind_after: null}
roles:
  release-managers: {users: [U0REL1], review_channel: C0REVIEW}
tools:
  send_external_message: {decisions: [approve, reject], approvers: [release-managers]}
"""
SEND = 'send_external_message {"recipient": "partner@example.com", "text": "hi"}'
LONG_SEND = SEND.replace('"hi"', '"' + "news " * 60 + '"')
PUBLISH = 'publish_report {"path": "reports/weekly.md", "channel": "public"}'
DELETE = 'delete_project_file {"path": "notes/old.txt"}'
REVIEW = "C0REVIEW"
LIVE = re.compile(r"<[@!#][^>]*>")


def serve(serve_bot, sqlite_url, tmp_path: Path, policy: str) -> Harness:  # type: ignore[no-untyped-def]
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    return serve_bot(sqlite_url, policy_file=path)


@pytest.fixture
def h(serve_bot, sqlite_url, tmp_path):  # type: ignore[no-untyped-def]
    return serve(serve_bot, sqlite_url, tmp_path, POLICY)


def pings(h: Harness, channel: str, thread: str) -> list[Message]:
    return [
        m for m in h.state.thread(channel, thread) if "approval apr_" in m.text and not buttons(m)
    ]


def ping_of(h: Harness, root: Message, count: int = 1) -> Message:
    found = h.state.wait_for(
        lambda: (p := pings(h, people.CHANNEL, root.ts)) and len(p) >= count and p
    )
    return found[count - 1]


def notified(h: Harness) -> list[AuditEvent]:
    with h.bot.db.transaction() as s:
        events = s.scalars(select(AuditEvent).where(AuditEvent.kind == "reviewers_notified"))
        return list(events)


def test_card_post_mentions_eligible_users_and_groups_never_the_requester(h):
    root, card = start_run(h, SEND)
    ping = ping_of(h, root)
    assert ping.ts > card.ts and ping.thread_ts == root.ts, "a reply after the card"
    assert "<@U0REL1> <@U0REL2> <!subteam^S0RELMGR>:" in ping.text
    # In a role, and even allowed to approve their own call: they started it, no ping.
    assert f"<@{people.REQUESTER}>" not in ping.text
    assert "<@U0SEC1>" not in ping.text, "security asked for a direct message instead"


def test_notify_dm_opens_a_direct_message_that_links_to_the_card(h):
    root, card = start_run(h, SEND)
    dm = h.state.wait_for(lambda: next(iter(h.state.dm_with(people.SECURITY)), None))
    assert dm.channel.startswith("D") and "conversations.open" in h.state.calls
    link = f"archives/{card.channel}/p{card.ts.replace('.', '')}?thread_ts={root.ts}"
    assert link in dm.text and "needs your review" in dm.text
    assert h.state.dm_with(people.RELEASE_MANAGER) == [], "release managers are mentioned"


def test_notify_none_tells_nobody(h):
    root, card = start_run(h, DELETE)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)  # the resume waits for the run's lock, held while any ping is sent
    assert pings(h, people.CHANNEL, root.ts) == []
    assert "conversations.open" not in h.state.calls
    assert notified(h) == []


def test_a_second_reviewer_is_pinged_when_the_first_signs_off(h):
    root, card = start_run(h, PUBLISH)
    first = ping_of(h, root)
    assert "<@U0REL1> <@U0REL2> <!subteam^S0RELMGR>" in first.text

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    second = ping_of(h, root, count=2)
    # U0REL1 is in S0RELMGR: the group is named member by member, without them.
    assert second.text.startswith("<@U0REL2> <@U0GINA>: approval")
    assert "U0REL1" not in second.text and "subteam" not in second.text
    assert "<@U0ALICE>" not in second.text

    h.driver.click(user=people.GROUP_ONLY, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert len(pings(h, people.CHANNEL, root.ts)) == 2, "redraws and the last sign-off ping nobody"
    assert [e.detail["after"] for e in notified(h)] == [None, people.RELEASE_MANAGER]


def test_mentions_in_agent_arguments_stay_inert(h):
    hostile = "<!channel> <@U0BOSS> <!subteam^S0EVIL> <#C0OTHER>"
    text = json.dumps({"recipient": hostile, "text": "<!here> <@U0BOSS>"})
    root, _card = start_run(h, f"send_external_message {text}")
    ping_of(h, root)
    h.state.wait_for(lambda: h.state.dm_with(people.SECURITY))
    allowed = {"<@U0ALICE>", "<@U0REL1>", "<@U0REL2>", "<!subteam^S0RELMGR>", "<#C0CHANGES>"}
    for message in list(h.state.messages):
        rendered = message.text + json.dumps(message.blocks)
        live = {m for m in LIVE.findall(rendered) if not m.startswith("<!date^")}
        assert live <= allowed, (message.channel, live - allowed)
    assert "&lt;!channel&gt;" in json.dumps(card_now(h, _card).blocks)


def test_review_channel_card_links_both_ways_and_approving_it_resumes_the_run(
    serve_bot, sqlite_url, tmp_path
):
    h = serve(serve_bot, sqlite_url, tmp_path, REVIEW_POLICY)
    h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=LONG_SEND)
    root = h.state.wait_for(lambda: next(iter(h.state.top_level(people.CHANNEL)), None))
    card = h.state.wait_for(
        lambda: next((m for m in h.state.top_level(REVIEW) if buttons(m)), None)
    )
    origin = json.dumps(card.blocks)
    assert "Requested in <#C0CHANGES>" in origin
    assert f"archives/{people.CHANNEL}/p{root.ts.replace('.', '')}|open the run" in origin

    line = h.state.wait_for(
        lambda: next((m for m in h.state.thread(people.CHANNEL, root.ts) if REVIEW in m.text), None)
    )
    assert f"archives/{REVIEW}/p{card.ts.replace('.', '')}|see the card" in line.text
    ping = h.state.wait_for(lambda: next(iter(pings(h, REVIEW, card.ts)), None))
    assert ping.text.startswith("<@U0REL1>: approval")
    assert not any(buttons(m) for m in h.state.thread(people.CHANNEL, root.ts))
    # Whoever sees the card in the review channel may read all of it.
    full = open_modal(h, people.RELEASE_MANAGER, card, "View full arguments")
    assert "news news" in json.dumps(full.view)

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result = result_message(h, root)
    assert "message sent to partner@example.com" in result.text
    h.state.wait_for(lambda: card_header(card_now(h, card)) == FINAL_HEADER)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_a_review_channel_card_whose_answer_was_lost_is_found_there_not_posted_again(
    serve_bot, sqlite_url, tmp_path
):
    path = tmp_path / "policy.yaml"
    path.write_text(REVIEW_POLICY)
    h = serve_bot(sqlite_url, policy_file=path, card_retry_seconds=0)
    lost = h.sandbox.misbehave(
        "chat.postMessage",
        match=lambda args: (args.get("metadata") or {}).get("event_type") == "approval_card",
        drop=True,
    )
    h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
    assert lost.reached.wait(30)
    assert h.bot.services.executor.wait_idle(30)
    assert h.bot.engine.reconcile().cards_posted == 1
    (card,) = [m for m in h.state.top_level(REVIEW) if buttons(m)]
    assert "conversations.history" in h.state.calls
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    root = h.state.top_level(people.CHANNEL)[0]
    assert "message sent" in result_message(h, root).text
    assert [m for m in h.state.top_level(REVIEW) if card_header(m)] == [card]


def test_a_click_on_a_review_channel_card_before_its_reference_is_stored_updates_it(
    serve_bot, sqlite_url, tmp_path
):
    h = serve(serve_bot, sqlite_url, tmp_path, REVIEW_POLICY)
    slow = h.sandbox.misbehave(
        "chat.postMessage",
        match=lambda args: (args.get("metadata") or {}).get("event_type") == "approval_card",
        hold=True,
    )
    try:
        h.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
        card = h.state.wait_for(
            lambda: next((m for m in h.state.top_level(REVIEW) if buttons(m)), None)
        )
        pending = card_header(card)
        h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
        h.state.wait_for(lambda: card_header(card_now(h, card)) != pending, timeout=25)
    finally:
        slow.release.set()
    root = h.state.top_level(people.CHANNEL)[0]
    assert "message sent" in result_message(h, root).text


def test_approve_all_pings_the_remaining_reviewers_once_for_the_click(h):
    second = PUBLISH.replace("weekly", "monthly")
    root, card = start_run(h, f"{PUBLISH}\n{second}")
    ping_of(h, root)
    h.driver.click(
        user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve all I may approve")
    )
    follow_up = ping_of(h, root, count=2)
    assert h.bot.inbox.wait_idle(30), "the click is done, with every ping it sends"
    assert pings(h, people.CHANNEL, root.ts) == [pings(h, people.CHANNEL, root.ts)[0], follow_up]
    assert follow_up.text.startswith("<@U0REL2> <@U0GINA>: approval")
    assert "2 of 2" not in json.dumps(card_now(h, card).blocks)
