"""A card's update in Slack and the store's record of what the card shows, kept true through
overlapping updates and crashes: see ``CardDraws`` for the order within a process and
``ApprovalRepository.mark_card`` for the check against the store."""

from __future__ import annotations

import logging

from agent_runtime.card_draws import CardDraws, decisions_on
from agent_runtime.notifier import Notifier
from agent_runtime.views import ApprovalView, approval_view
from store.db import Database
from store.repositories import ApprovalRepository, CardRepository

logger = logging.getLogger(__name__)


class CardUpdates:
    def __init__(self, *, db: Database, notifier: Notifier) -> None:
        self.db = db
        self.notifier = notifier
        self.draws = CardDraws()

    def update(self, view: ApprovalView) -> ApprovalView | None:
        """One update and its check; what to draw next, if anything. Within this process
        (``CardDraws``): not sent if a later state was; while updates of the card overlap,
        the store is told it may show the oldest, none is marked, and the last one back has
        the card drawn once more, alone."""
        with self.draws.turn(view) as turn:
            if turn.behind:
                return None
            if turn.overlapping_oldest is not None:
                with self.db.single() as s:
                    CardRepository(s).forget_card(view.id, shows=turn.overlapping_oldest)
            try:
                self.notifier.approval_updated(view)
            except Exception:
                logger.exception("could not update the card of %s; it is retried later", view.id)
                # It may have reached Slack all the same: nothing older goes out after it,
                # and the repair is to look at the card.
                turn.sent()
                landing = turn.back()
                with self.db.single() as s:
                    CardRepository(s).forget_card(view.id, shows=view.status)
                return self._now(view.id) if landing.last and landing.overlapped else None
            turn.sent()
            landing = turn.back()
        if not landing.last:
            return None
        if landing.overlapped:
            return self._now(view.id)
        with self.db.single() as s:  # one statement: its own transaction on PostgreSQL
            if CardRepository(s).mark_card(
                view.id, status=view.status, decisions=decisions_on(view)
            ):
                return None
        # Drawn before a change that another process drew first (a cancel, or a decision,
        # between a decision and its redraw): Slack shows whichever update came last.
        with self.db.transaction() as s:
            CardRepository(s).forget_card(view.id, shows=view.status)  # left to the repair
            request = ApprovalRepository(s).get(view.id)
            now = approval_view(request) if request is not None else None
        if now is not None and (now.status, decisions_on(now)) != (
            view.status,
            decisions_on(view),
        ):
            return now
        return None

    def _now(self, request_id: str) -> ApprovalView | None:
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            return approval_view(request) if request is not None else None
