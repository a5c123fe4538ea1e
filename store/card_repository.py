"""Where a request's card is, and what the card is known to show (so that a drawing that
reached Slack after a newer one is drawn again)."""

from __future__ import annotations

from sqlalchemy import bindparam, case, func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter

from store.db import affected
from store.models import ApprovalRequest, Decision
from store.statuses import RequestStatus

_SHOWS: BindParameter[str] = bindparam("shows")
_FORGET = (
    update(ApprovalRequest)
    .where(ApprovalRequest.id == bindparam("forgotten"))
    .values(
        card_status=case(
            (
                ApprovalRequest.status == _SHOWS,
                case(
                    (ApprovalRequest.status == RequestStatus.RESUMING, ApprovalRequest.card_status),
                    else_=None,
                ),
            ),
            else_=_SHOWS,
        )
    )
)
"""Built once: a sign-off that leaves more to give sends it in its transaction."""

_DECISIONS_NOW = (
    select(func.count())
    .select_from(Decision)
    .where(Decision.request_id == bindparam("marked"))
    .scalar_subquery()
)
_MARK = (
    update(ApprovalRequest)
    .where(
        ApprovalRequest.id == bindparam("marked"),
        ApprovalRequest.status == bindparam("drawn_status"),
        bindparam("drawn_decisions") == _DECISIONS_NOW,
    )
    .values(card_status=bindparam("drawn_status"))
)
"""Built once: every card drawn sends it."""


class CardRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def mark_card(self, request_id: str, *, status: str, decisions: int) -> bool:
        """Remember that the card shows ``status``; False (nothing remembered) if the request
        has moved on since it was drawn with ``decisions`` decisions: its status, or a
        decision recorded since (the status alike). The card is out of date and must be drawn
        again."""
        values = {"marked": request_id, "drawn_status": status, "drawn_decisions": decisions}
        return affected(self.session.connection().execute(_MARK, values)) > 0

    def forget_card(self, request_id: str, *, shows: str) -> None:
        """The card may show an older drawing than the one marked (it reached Slack after a
        newer one): with the status it shows, what it shows is forgotten; otherwise it is put
        back to ``shows``, the status that drawing showed. Either way the repair finds it out
        of date, if nothing draws it again first. Except while resuming with a drawing that
        says so: the repair looks at a resuming card only if it may still show its buttons,
        and what the row says (the buttons, or "resuming") is then kept."""
        self.session.connection().execute(_FORGET, {"forgotten": request_id, "shows": shows})

    def adopt_card(
        self, request: ApprovalRequest, *, channel: str, ts: str, shows: str | None
    ) -> bool:
        """Remember where the card is, unless a reference is already stored (the first one
        found wins); ``shows``: the status the card was drawn with, ``None`` if it is not
        known to show the request as it is now. Lock the row first."""
        if request.card_ts is not None:
            return False
        request.card_channel = channel
        request.card_ts = ts
        request.card_status = shows
        return True
