"""What users do in the e2e tests, written once: start a run, find its card, wait for results."""

from __future__ import annotations

from bot.sandbox import people
from bot.sandbox.driver import Button, buttons
from bot.sandbox.state import Message, SandboxState
from tests.conftest import Harness

SEND = 'send_external_message {"recipient": "partner@example.com", "text": "Release is out"}'
DELETE = 'delete_project_file {"path": "notes/old.txt"}'
PUBLISH = 'publish_report {"path": "reports/weekly.md", "channel": "public"}'


def start_run(h: Harness, text: str, *, user: str = people.REQUESTER) -> tuple[Message, Message]:
    """Slash command -> the run's root message and its first approval card."""
    before = {m.ts for m in h.state.top_level(people.CHANNEL)}
    reply = h.driver.slash_command(user=user, channel=people.CHANNEL, text=text)
    assert reply.status == 200, reply
    root = h.state.wait_for(
        lambda: next((m for m in h.state.top_level(people.CHANNEL) if m.ts not in before), None)
    )
    card = h.state.wait_for(
        lambda: next((m for m in h.state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
    )
    return root, card


def button(card: Message, label: str, position: int = 0) -> Button:
    matching = [b for b in buttons(card) if b.text == label]
    return matching[position]


def result_message(h: Harness, root: Message) -> Message:
    return h.state.wait_for(
        lambda: next(
            (m for m in h.state.thread(people.CHANNEL, root.ts) if m.text.startswith("Run ")), None
        )
    )


def card_now(h: Harness, card: Message) -> Message:
    current = h.state.message(card.channel, card.ts)
    assert current is not None
    return current


def ephemeral_for(h: Harness, user: str, count: int = 1) -> str:
    notes = h.state.wait_for(lambda: (e := h.state.ephemerals_for(user)) and len(e) >= count and e)
    return notes[count - 1].text


def open_modal(h: Harness, user: str, card: Message, label: str | Button, position: int = 0):  # type: ignore[no-untyped-def]
    """Press a button (by label, or a Button captured earlier) and return the modal it opens."""
    before = {v.id for v in h.state.open_views(user)}
    target = label if not isinstance(label, str) else button(card, label, position)
    h.driver.click(user=user, message=card, button=target)
    return h.state.wait_for(
        lambda: next((v for v in h.state.open_views(user) if v.id not in before), None)
    )


FINAL_HEADER = "Decided"
"""The card's header once its request is resolved ("Decided, resuming the run" comes before)."""


def card_header(message: Message) -> str | None:
    first = message.blocks[0] if message.blocks else {}
    return first.get("text", {}).get("text") if first.get("type") == "header" else None


def cards_in(state: SandboxState, root: Message) -> list[Message]:
    """The approval cards in a run's thread (every card starts with its header)."""
    return [m for m in state.thread(root.channel, root.ts) if card_header(m) is not None]


def results_in(state: SandboxState, root: Message) -> list[Message]:
    return [m for m in state.thread(root.channel, root.ts) if m.text.startswith("Run ")]


def settled(state: SandboxState, root: Message, *, card: Message) -> bool:
    """The card shows its final status and the run's result is in the thread."""
    now = state.message(card.channel, card.ts)
    return now is not None and card_header(now) == FINAL_HEADER and bool(results_in(state, root))
