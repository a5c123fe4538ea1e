"""Decisions: appended, never changed (the audit log says who decided what)."""

from __future__ import annotations

import functools
from typing import Any, TypedDict

from sqlalchemy import Select, Update, bindparam, insert, inspect, select, update
from sqlalchemy.orm import Session, make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from store import pending_slots
from store.claim_repository import ClaimRepository, ClaimTerms, claiming
from store.models import Action, ApprovalRequest, Decision, new_id, utcnow

_INSERT = insert(Decision)
"""Built once (the row goes as parameters): a statement built per call costs the click's path
its construction and cache key each time."""
_SET_OUTCOME = (
    update(Action)
    .where(Action.id == bindparam("decided_action"))
    .values(outcome=bindparam("new_outcome"))
)


@functools.lru_cache(maxsize=4)
def _inserting_deciding(names: tuple[str, ...]) -> Update:
    """PostgreSQL: the decision (these columns) and its action's new outcome in one
    statement, built once."""
    row = insert(Decision).values({name: bindparam(f"new_{name}") for name in names})
    return _SET_OUTCOME.add_cte(row.cte("decided"))


@functools.lru_cache(maxsize=4)
def _inserting_deciding_claiming(names: tuple[str, ...]) -> Select[int]:
    """PostgreSQL: the decision, its action's new outcome, and the claim of the request it
    completes with the removal of its review slots, in one statement, built once."""
    row = insert(Decision).values({name: bindparam(f"new_{name}") for name in names})
    return claiming(row.cte("decided"), _SET_OUTCOME.cte("outcome_set"))


class DecisionFields(TypedDict):
    """Who decided what, as ``DecisionRepository.add`` takes it."""

    reviewer_id: str
    team_id: str | None
    type_: str
    message: str | None
    attempt_key: str | None


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
        outcome: str | None = None,
    ) -> Decision:
        """Written now, as one Core statement (before anything the transaction locks after
        it, such as the audit chain's head), and added to ``action.decisions`` as a row the
        session holds: the ORM has nothing left to write for it. ``outcome``: the action's new
        outcome, written with it (on PostgreSQL in the same statement; its review slots are
        rewritten at the commit). Not inside a savepoint: one rolled back would leave the
        session holding the decision."""
        row = _row(
            action,
            reviewer_id=reviewer_id,
            team_id=team_id,
            type_=type_,
            message=message,
            attempt_key=attempt_key,
        )
        conn = self.session.connection()
        changed = {"decided_action": action.id, "new_outcome": outcome}
        if outcome is None:
            conn.execute(_INSERT, row)
        elif conn.dialect.name == "postgresql":
            deciding = _inserting_deciding(tuple(row))
            conn.execute(deciding, {**{f"new_{k}": v for k, v in row.items()}, **changed})
        else:
            conn.execute(_INSERT, row)
            conn.execute(_SET_OUTCOME, changed)
        return self._held(row, action, outcome=outcome)

    def add_claiming(
        self,
        action: Action,
        *,
        fields: DecisionFields,
        outcome: str | None,
        claim: ClaimTerms,
        loaded: ApprovalRequest | None,
    ) -> bool:
        """``add`` for the decision that completes its request, with the request's claim
        (``ClaimRepository.claim``): on PostgreSQL in the same statement when the decision
        changes its action's outcome. True if the claim was won; the decision is written
        either way."""
        repo = ClaimRepository(self.session)
        conn = self.session.connection()
        if outcome is None or conn.dialect.name != "postgresql":
            self.add(action, **fields, outcome=outcome)
            return repo.claim_on(claim, loaded=loaded)
        row = _row(action, **fields)
        values = {
            **{f"new_{k}": v for k, v in row.items()},
            "decided_action": action.id,
            "new_outcome": outcome,
            **claim.values(),
        }
        won = bool(conn.execute(_inserting_deciding_claiming(tuple(row)), values).scalar())
        self._held(row, action, outcome=outcome)
        if won:
            repo.claimed(claim, loaded=loaded)
        return won

    def _held(self, row: dict[str, Any], action: Action, *, outcome: str | None) -> Decision:
        """The decision written, held by the session as a loaded row (nothing to insert)."""
        decision = Decision(**row)
        make_transient_to_detached(decision)
        self.session.add(decision)  # persistent, as if loaded: nothing to insert
        if "decisions" in inspect(action).dict:  # else loaded when asked, with this one
            set_committed_value(action, "decisions", [*action.decisions, decision])
        if outcome is not None:
            set_committed_value(action, "outcome", outcome)
            pending_slots.action_changed(
                self.session, action_id=action.id, request_id=action.request_id
            )
        return decision

    def of_attempt(self, request_id: str, attempt_key: str) -> dict[str, str]:
        """Action id -> the version it was decided at, for one attempt's decisions on a request."""
        stmt = select(Decision.action_id, Decision.action_hash).where(
            Decision.request_id == request_id, Decision.attempt_key == attempt_key
        )
        return {row[0]: row[1] for row in self.session.execute(stmt)}


def _row(
    action: Action,
    *,
    reviewer_id: str,
    team_id: str | None,
    type_: str,
    message: str | None,
    attempt_key: str | None,
) -> dict[str, Any]:
    return {
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
