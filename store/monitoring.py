"""What operators watch: approvals waiting for people, by risk, and how long the oldest waits.

Read at every scrape of ``/metrics``; both queries start from the pending requests (an indexed
status), so their cost follows what is waiting, not the history kept."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from store.models import Action, ApprovalRequest, utcnow
from store.statuses import RequestStatus


@dataclass(frozen=True)
class PendingSummary:
    by_risk: dict[str, int]
    """Actions still to be decided in pending requests, by their risk."""
    oldest_seconds: float
    """Age of the oldest pending request (0 when none waits)."""


class MonitoringQueries:
    def __init__(self, session: Session) -> None:
        self.session = session

    def pending(self, now: dt.datetime | None = None) -> PendingSummary:
        rows = self.session.execute(
            select(Action.risk, func.count())
            .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
            .where(
                ApprovalRequest.status == RequestStatus.PENDING,
                Action.outcome.is_(None),
                Action.exempt.is_(False),
            )
            .group_by(Action.risk)
        ).all()
        oldest = self.session.scalar(
            select(func.min(ApprovalRequest.created_at)).where(
                ApprovalRequest.status == RequestStatus.PENDING
            )
        )
        age = ((now or utcnow()) - oldest).total_seconds() if oldest is not None else 0.0
        return PendingSummary(
            by_risk={str(risk): int(count) for risk, count in rows}, oldest_seconds=max(age, 0.0)
        )
