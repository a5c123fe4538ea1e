"""Revise after reject, bounded, over signed HTTP: the reviewer's reason reaches the agent, a
corrected call gets a new card showing what changed, and the policy stops a loop."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent_runtime.policy import BUNDLED_POLICY
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.state import Message
from tests.bot.flows import SEND, button, result_message, start_run
from tests.conftest import Harness

FIX = 'Wrong recipient, use {"recipient": "ops@example.com"}'


def reject(h: Harness, card: Message, reason: str) -> None:
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Reject"))
    modal = h.state.wait_for(lambda: h.state.open_views(people.SECURITY))[-1]
    h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"reject_reason": {"reason": reason}}
    )


def next_card(h: Harness, root: Message, after: Message) -> Message:
    """The first card posted in the thread after ``after`` (not a redraw of an earlier one)."""
    return h.state.wait_for(
        lambda: next(
            (
                m
                for m in h.state.thread(people.CHANNEL, root.ts)
                if buttons(m) and float(m.ts) > float(after.ts)
            ),
            None,
        )
    )


def test_a_corrected_call_gets_a_card_showing_what_changed(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    reject(h, card, FIX)
    revised = next_card(h, root, card)
    shown = json.dumps(revised.blocks, ensure_ascii=False)
    assert "Revision 1" in shown and "Wrong recipient" in shown
    assert "partner@example.com" in shown and "ops@example.com" in shown  # before → after

    h.driver.click(user=people.RELEASE_MANAGER, message=revised, button=button(revised, "Approve"))
    assert "message sent to ops@example.com" in result_message(h, root).text
    assert [e["recipient"] for e in h.workspace.effects()] == ["ops@example.com"]


def test_the_policy_stops_a_revision_loop(serve_bot, sqlite_url, tmp_path: Path):
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["defaults"]["max_revisions"] = 1
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    h = serve_bot(sqlite_url, policy_file=path)
    root, card = start_run(h, SEND)
    reject(h, card, FIX)
    revised = next_card(h, root, card)
    reject(h, revised, 'Still wrong, use {"recipient": "sec@example.com"}')
    result = result_message(h, root)  # the agent was told it may not propose it again
    cards = [m for m in h.state.thread(people.CHANNEL, root.ts) if m.metadata]
    assert len({m.ts for m in cards}) == 2
    assert "may not be proposed again in this run" in result.text
    assert h.workspace.effects() == []
