"""What one process has sent of each card, and what it has on the way. Two updates of one card
in flight at once reach Slack in either order, and the answers come back in either order too;
if the store were told "the card shows X" while another update might still land after X, a
process killed at that moment would leave the card wrong for good. So, within a process:

- an update from an older state than one already sent is not sent at all (it could only land
  last);
- while updates of a card overlap, none is marked as shown: the store is first told that the
  card shows the oldest of them (or nothing known), so the repair finds it if the process
  dies; the last one to come back then draws the card once more, alone, and that one is
  marked.

Nothing waits: a slow update holds up neither a resume nor its end. Across processes the
store's mark settles it (``Announcer.show_card``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
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
REMEMBERED = 4096
"""Cards whose latest update sent is remembered (the least recently drawn are forgotten)."""


def decisions_on(view: ApprovalView) -> int:
    """How many decisions a card was drawn with: with its status, what tells a drawing out of
    date (an approval of two, an edit, leave the status pending)."""
    return sum(len(action.decisions) for action in view.actions)


def rank_of(view: ApprovalView) -> Rank:
    return _STAGES.get(RequestStatus(view.status), _ENDED), decisions_on(view)


@dataclass
class _Flights:
    """A card's updates on their way (rank and status of each), and whether any two have
    overlapped since the card was last quiet."""

    on_way: list[tuple[Rank, str]] = field(default_factory=list)
    overlapped: bool = False


@dataclass(frozen=True)
class Landing:
    """How an update's turn ended: ``last`` out of its card's busy spell, and whether
    updates overlapped in that spell (the card must then be drawn once more, alone)."""

    last: bool
    overlapped: bool


class Turn:
    """One update of a card, from the moment it is decided on until it came back."""

    def __init__(
        self, draws: CardDraws, view: ApprovalView, *, behind: bool, oldest: str | None
    ) -> None:
        self._draws = draws
        self._view = view
        self.rank = rank_of(view)
        self.behind = behind
        """An update from a later state was already sent: this one is not to be sent."""
        self.overlapping_oldest = oldest
        """Set when another update of the card is on its way: the status of the oldest
        drawing now on its way, which the store is to be told the card may show."""
        self.landing: Landing | None = None

    def sent(self) -> None:
        self._draws._record_sent(self._view.id, self.rank)

    def back(self) -> Landing:
        """The update came back (answered or failed): it is no longer on its way."""
        if self.landing is None:
            self.landing = self._draws._land(self._view.id, (self.rank, self._view.status))
        return self.landing


class CardDraws:
    def __init__(self, *, remembered: int = REMEMBERED) -> None:
        self._guard = threading.Lock()
        self._remembered = remembered
        self._sent: OrderedDict[str, Rank] = OrderedDict()
        self._flights: dict[str, _Flights] = {}

    @contextmanager
    def turn(self, view: ApprovalView) -> Iterator[Turn]:
        """An update's turn: ``behind`` if it must not be sent; otherwise it counts as on its
        way until ``back`` (at the latest when the block ends)."""
        rank = rank_of(view)
        with self._guard:
            last = self._sent.get(view.id)
            behind = last is not None and rank < last
            oldest = None
            if not behind:
                flights = self._flights.setdefault(view.id, _Flights())
                flights.on_way.append((rank, view.status))
                if len(flights.on_way) > 1:
                    flights.overlapped = True
                    oldest = min(flights.on_way)[1]
        turn = Turn(self, view, behind=behind, oldest=oldest)
        try:
            yield turn
        finally:
            if not behind:
                turn.back()

    def _record_sent(self, card_id: str, rank: Rank) -> None:
        with self._guard:
            last = self._sent.pop(card_id, None)
            self._sent[card_id] = rank if last is None or last < rank else last
            while len(self._sent) > self._remembered:
                self._sent.popitem(last=False)

    def _land(self, card_id: str, flight: tuple[Rank, str]) -> Landing:
        with self._guard:
            flights = self._flights[card_id]
            flights.on_way.remove(flight)
            if flights.on_way:
                return Landing(last=False, overlapped=True)
            del self._flights[card_id]
            return Landing(last=True, overlapped=flights.overlapped)
