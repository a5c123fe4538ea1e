"""Decisions: appended, never changed (the audit log says who decided what)."""

from __future__ import annotations

from sqlalchemy import insert, inspect, select
from sqlalchemy.orm import Session, make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from store.models import Action, Decision, new_id, utcnow

_INSERT = insert(Decision)
"""Built once (the row goes as parameters): a statement built per call costs the click's path
its construction and cache key each time."""


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
        """Written now, as one Core statement (before anything the transaction locks after
        it, such as the audit chain's head), and added to ``action.decisions`` as a row the
        session holds: the ORM has nothing left to write for it. Not inside a savepoint: one
        rolled back would leave the session holding the decision."""
        row = {
            "id": new_id("dec"),
            "action_id": action.id,
            "request_id": action.request_id,
            "reviewer_id": reviewer_id,
            "team_id": team_id,
            "type": type_,
            "message": message,
            "action_hash": action.bound_hash,
            "created_at": utcnow(),
            "attempt_key": attempt_key,
        }
        self.session.connection().execute(_INSERT, row)
        decision = Decision(**row)
        make_transient_to_detached(decision)
        self.session.add(decision)  # persistent, as if loaded: nothing to insert
        if "decisions" in inspect(action).dict:  # else loaded when asked, with this one
            set_committed_value(action, "decisions", [*action.decisions, decision])
        return decision

    def of_attempt(self, request_id: str, attempt_key: str) -> dict[str, str]:
        """Action id -> the version it was decided at, for one attempt's decisions on a request."""
        stmt = select(Decision.action_id, Decision.action_hash).where(
            Decision.request_id == request_id, Decision.attempt_key == attempt_key
        )
        return {row[0]: row[1] for row in self.session.execute(stmt)}
