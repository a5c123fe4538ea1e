"""What one process has sent of each card, and what it has on the way. Two updates of one card
in flight at once reach Slack in either order; if the older one lands last and its process dies
before checking it, the store must not be left believing the newer one. So, within a process:

- an update from an older state than one already sent is not sent at all (it could only land
  last);
- an update that lands while an older one is still on its way is not marked as shown: the
  older one's check draws the card again, or, if the process dies first, the repair does.

Nothing waits: a slow update holds up neither a resume nor its end. Across processes the
store's mark settles it (``Announcer.show_card``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

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


class Turn:
    """One update of a card, from the moment it is decided on until its check is done."""

    def __init__(self, draws: CardDraws, card_id: str, rank: Rank, *, behind: bool) -> None:
        self._draws = draws
        self._card_id = card_id
        self.rank = rank
        self.behind = behind
        """An update from a later state was already sent: this one is not to be sent."""

    def sent(self) -> None:
        self._draws._record_sent(self._card_id, self.rank)

    @property
    def older_in_flight(self) -> bool:
        """An update from an earlier state is still on its way: it may land after this one."""
        return self._draws._older_flying(self._card_id, self.rank)


class CardDraws:
    def __init__(self, *, remembered: int = REMEMBERED) -> None:
        self._guard = threading.Lock()
        self._remembered = remembered
        self._sent: OrderedDict[str, Rank] = OrderedDict()
        self._flying: dict[str, list[Rank]] = {}

    @contextmanager
    def turn(self, view: ApprovalView) -> Iterator[Turn]:
        """An update's turn: ``behind`` if it must not be sent; otherwise it counts as on its
        way until the block ends (after its check)."""
        rank = rank_of(view)
        with self._guard:
            last = self._sent.get(view.id)
            behind = last is not None and rank < last
            if not behind:
                self._flying.setdefault(view.id, []).append(rank)
        try:
            yield Turn(self, view.id, rank, behind=behind)
        finally:
            if not behind:
                with self._guard:
                    flying = self._flying[view.id]
                    flying.remove(rank)
                    if not flying:
                        del self._flying[view.id]

    def _record_sent(self, card_id: str, rank: Rank) -> None:
        with self._guard:
            last = self._sent.pop(card_id, None)
            self._sent[card_id] = rank if last is None or last < rank else last
            while len(self._sent) > self._remembered:
                self._sent.popitem(last=False)

    def _older_flying(self, card_id: str, rank: Rank) -> bool:
        with self._guard:
            return any(other < rank for other in self._flying.get(card_id, ()))
