"""The order in which one process draws a card. Two updates of one card in flight at once reach
Slack in either order, and a process that dies between an update's landing and its mark leaves
the store believing the other one. Within a process that is avoidable: one update of a card at
a time, and never one drawn from an older state than an update already sent.

Across processes the store's mark settles it (``Announcer.show_card``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from agent_runtime.views import ApprovalView
from store.statuses import RequestStatus

Rank = tuple[int, int]
"""How far along the request a drawing is: its stage, then its number of decisions. Both only
grow: a request never goes back to pending, and decisions are never removed."""

_STAGES = {RequestStatus.PENDING: 0, RequestStatus.RESUMING: 1}
_ENDED = 2


def decisions_on(view: ApprovalView) -> int:
    """How many decisions a card was drawn with: with its status, what tells a drawing out of
    date (an approval of two, an edit, leave the status pending)."""
    return sum(len(action.decisions) for action in view.actions)


def rank_of(view: ApprovalView) -> Rank:
    return _STAGES.get(RequestStatus(view.status), _ENDED), decisions_on(view)


@dataclass
class _Card:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: Rank | None = None
    users: int = 0


class Turn:
    """One update's turn at a card: whether it is still worth sending, and what was sent."""

    def __init__(self, card: _Card, rank: Rank) -> None:
        self._card = card
        self.rank = rank

    @property
    def behind(self) -> bool:
        """An update from a later state of the request was already sent by this process."""
        return self._card.sent is not None and self.rank < self._card.sent

    def sent(self) -> None:
        if self._card.sent is None or self._card.sent < self.rank:
            self._card.sent = self.rank


class CardDraws:
    """Per card, in this process: a lock held from an update's send to its mark, and the
    latest state sent, remembered while anyone holds the card (``kept`` holds it for a
    resume, whose "under way" update and end run in two threads)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._cards: dict[str, _Card] = {}

    @contextmanager
    def kept(self, card_id: str) -> Iterator[None]:
        card = self._enter(card_id)
        try:
            yield
        finally:
            self._leave(card_id, card)

    @contextmanager
    def turn(self, view: ApprovalView) -> Iterator[Turn]:
        """Wait for the card's update in flight, if any, then take the turn."""
        card = self._enter(view.id)
        try:
            with card.lock:
                yield Turn(card, rank_of(view))
        finally:
            self._leave(view.id, card)

    def _enter(self, card_id: str) -> _Card:
        with self._guard:
            card = self._cards.setdefault(card_id, _Card())
            card.users += 1
            return card

    def _leave(self, card_id: str, card: _Card) -> None:
        with self._guard:
            card.users -= 1
            if card.users == 0:
                del self._cards[card_id]
