"""Kill -9 the bot at each point of the decision pipeline; a new process finishes the job:
every request reaches a final state, each effect happens once, no decision is lost, and the
card and the thread show the outcome. Real processes, real PostgreSQL.

The survivor is done only when the card shows its final status and the result is in the thread:
a card left saying "resuming" has no buttons either, so that alone proves nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_runtime.agents.workspace import Workspace
from agent_runtime.faults import DECISION_POINTS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from bot.sandbox.state import Message, SandboxState
from store.db import Database
from store.models import ApprovalRequest, Decision
from tests.bot.flows import SEND, cards_in, results_in, settled

WAIT = 180.0  # bounds each wait generously: the crash loop runs these with the CPU saturated


def start_and_find_card(bot: BotProcess, state: SandboxState) -> tuple[Message, Message]:
    bot.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
    root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None), timeout=WAIT)
    card = state.wait_for(
        lambda: next((m for m in cards_in(state, root) if buttons(m)), None), timeout=WAIT
    )
    return root, card


def wait_settled(state: SandboxState, root: Message, *, card: Message, bot: BotProcess) -> None:
    """Wait for the survivor to finish; if it never does, fail with what the card shows and
    what the bot logged (a timeout alone tells nothing about where it stopped)."""
    try:
        state.wait_for(lambda: settled(state, root, card=card), timeout=WAIT)
    except TimeoutError:
        bot.stop()  # its log is complete once it has stopped
        shown = state.message(card.channel, card.ts)
        blocks = json.dumps(shown.blocks if shown is not None else None)[:2000]
        pytest.fail(
            f"never settled; results in the thread: {len(results_in(state, root))}; "
            f"the card shows {blocks}\nthe bot logged:\n{''.join(bot.log[-60:])}"
        )


def approve(bot: BotProcess, card: Message) -> None:
    approve = next(b for b in buttons(card) if b.text == "Approve")
    bot.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)


def check_the_outcome(
    state: SandboxState, root: Message, *, card: Message, pg_url: str, ws: Path
) -> None:
    """After the survivor stopped: exactly one card and one result, one effect, one decision."""
    (result,) = results_in(state, root)
    assert "message sent to partner@example.com" in result.text
    assert [m.ts for m in cards_in(state, root)] == [card.ts]
    assert [e["tool"] for e in Workspace(ws).effects()] == ["send_external_message"]
    card_now = json.dumps(state.message(card.channel, card.ts).blocks)
    assert f"<@{people.RELEASE_MANAGER}> approved" in card_now
    db = Database(pg_url)
    with db.transaction() as s:
        assert s.scalars(select(ApprovalRequest.status)).all() == ["resolved"]
        assert len(s.scalars(select(Decision)).all()) == 1
    db.dispose()


def ended(pg_url: str) -> tuple[str, str]:
    """The request's status and its run's, as the store has them."""
    db = Database(pg_url)
    with db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        statuses = (request.status, request.run.status)
    db.dispose()
    return statuses


@pytest.mark.parametrize("point", DECISION_POINTS)
def test_a_crash_at_any_point_is_finished_by_the_next_process(
    point, migrated_pg_url, tmp_path: Path
):
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    state = sandbox.state
    workspace = tmp_path / "workspace"
    crashing = BotProcess(
        bot_env(sandbox, migrated_pg_url, workspace, APPROVAL_BOT_FAULT=point), sandbox
    )
    try:
        root, card = start_and_find_card(crashing, state)
        try:
            approve(crashing, card)
        except OSError:
            # The click is stored before its ack, and a worker may claim it and die before
            # the ack leaves (Slack would show a timeout): the click must be decided anyway.
            assert point == "after_ack", f"the click was not acked before {point}"
        assert crashing.proc.wait(timeout=WAIT) == -9, f"the bot should have died at {point}"
    finally:
        if crashing.proc.poll() is None:
            crashing.kill()
    if point == "before_card_update":
        # The request's end and its run's were one commit: both are there, or neither.
        assert ended(migrated_pg_url) == ("resolved", "completed")

    survivor = BotProcess(bot_env(sandbox, migrated_pg_url, workspace), sandbox)
    try:
        wait_settled(state, root, card=card, bot=survivor)
    finally:
        survivor.stop()
        sandbox.stop()
    check_the_outcome(state, root, card=card, pg_url=migrated_pg_url, ws=workspace)


def test_a_card_posted_just_before_a_crash_is_adopted_not_posted_twice(
    migrated_pg_url, tmp_path: Path
):
    """Killed after Slack took the card, before its reference was stored: the next process
    finds that card in the thread (by its metadata), and the approval works from it."""
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    state = sandbox.state
    workspace = tmp_path / "workspace"
    env = bot_env(sandbox, migrated_pg_url, workspace, APPROVAL_BOT_FAULT="after_card_post")
    crashing = BotProcess(env, sandbox)
    try:
        root, card = start_and_find_card(crashing, state)
        assert crashing.proc.wait(timeout=WAIT) == -9, "the bot should have died after the post"
    finally:
        if crashing.proc.poll() is None:
            crashing.kill()

    survivor = BotProcess(bot_env(sandbox, migrated_pg_url, workspace), sandbox)  # reconciles first
    try:
        assert len(cards_in(state, root)) == 1, "the card was posted again"
        approve(survivor, card)
        wait_settled(state, root, card=card, bot=survivor)
    finally:
        survivor.stop()
        sandbox.stop()
    check_the_outcome(state, root, card=card, pg_url=migrated_pg_url, ws=workspace)
