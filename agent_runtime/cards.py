"""Approval cards in the chat: posted and updated outside every database transaction.

A post can fail, or reach Slack while its answer is lost (a timeout, a dropped connection, the
process dying before it stored the reference). The card's reference is therefore stored after
the post, in a short transaction of its own; a click on a card whose reference is not stored yet
brings it along (see ``decisions``), and the reconciler looks for a card before posting again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agent_runtime.faults import fault_point
from agent_runtime.notifier import MessageRef
from agent_runtime.views import ApprovalView, approval_view
from store.repositories import ApprovalRepository

if TYPE_CHECKING:
    from agent_runtime.engine import ApprovalEngine

logger = logging.getLogger(__name__)


def post(engine: ApprovalEngine, request_id: str, *, look_first: bool = False) -> None:
    """Post the card of a pending request that has none, then remember where it is.

    ``look_first``: adopt a card already in the chat for this request instead of posting
    another. Callers hold the run's thread lock, so one process at a time posts a run's cards.
    """
    with engine.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        if request is None or request.status != "pending" or request.card_ts is not None:
            return
        drawn = approval_view(request)
    ref = _find(engine, drawn) if look_first else None
    if ref is None:
        try:
            ref = engine.notifier.approval_requested(drawn)
        except Exception:
            logger.exception("could not post the card of %s; the reconciler will retry", drawn.id)
            return
        fault_point("after_card_post")
    if ref is not None:
        _keep(engine, drawn, ref=ref)


def _find(engine: ApprovalEngine, drawn: ApprovalView) -> MessageRef | None:
    try:
        return engine.notifier.find_card(drawn)
    except Exception:
        # Posting again risks a second card; never posting leaves reviewers with none.
        logger.exception("could not look for the card of %s; posting it again", drawn.id)
        return None


def _keep(engine: ApprovalEngine, drawn: ApprovalView, *, ref: MessageRef) -> None:
    """Store the reference; if the request moved on while the card was being posted (a
    decision from a modal, an expiry), draw the card again as it is now."""
    with engine.db.transaction() as s:
        repo = ApprovalRepository(s)
        request = repo.get(drawn.id, for_update=True)
        if request is None:
            return
        repo.adopt_card(request, channel=ref.channel, ts=ref.ts, shows=drawn.status)
        now = approval_view(request)
    if (now.status, now.outcome, now.actions) != (drawn.status, drawn.outcome, drawn.actions):
        show(engine, now)


def show(engine: ApprovalEngine, view: ApprovalView) -> None:
    """Re-render the card; remember what it shows so a stale card can be repaired later.
    A card whose reference is not stored yet is left to whoever stores it."""
    if view.card_ts is None:
        return
    try:
        engine.notifier.approval_updated(view)
    except Exception:
        logger.exception("could not update the card of %s; the reconciler will retry", view.id)
        return
    with engine.db.transaction() as s:
        ApprovalRepository(s).mark_card(view.id, status=view.status)
