"""Decisions: appended, never changed (the audit log says who decided what)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.models import Action, Decision, new_id, utcnow


class DecisionRepository:
    """Append-only: there is no update and no delete."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def add(
        self,
        action: Action,
        *,
        reviewer_id: str,
        team_id: str | None,
        type_: str,
        message: str | None,
        attempt_key: str | None = None,
    ) -> Decision:
        decision = Decision(
            id=new_id("dec"),
            action_id=action.id,
            request_id=action.request_id,
            reviewer_id=reviewer_id,
            team_id=team_id,
            type=type_,
            message=message,
            action_hash=action.bound_hash,
            created_at=utcnow(),
            attempt_key=attempt_key,
        )
        self.session.add(decision)
        action.decisions.append(decision)  # written with the transaction's next flush
        return decision

    def of_attempt(self, request_id: str, attempt_key: str) -> dict[str, str]:
        """Action id -> the version it was decided at, for one attempt's decisions on a request."""
        stmt = select(Decision.action_id, Decision.action_hash).where(
            Decision.request_id == request_id, Decision.attempt_key == attempt_key
        )
        return {row[0]: row[1] for row in self.session.execute(stmt)}
