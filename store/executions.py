"""Executions of approved actions: the store side of the point-of-effect gate."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, contains_eager

from store.models import Action, ActionExecution, ApprovalRequest, utcnow
from store.statuses import RUNS_THE_TOOL, RequestStatus

SPENDABLE_OUTCOMES = RUNS_THE_TOOL
RESUMING = RequestStatus.RESUMING


class ExecutionRepository:
    """Takes a session, never commits: the gate owns the transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def spendable(self, *, run_id: str, tool_name: str) -> list[Action]:
        """Approved actions of this run and tool whose request is being resumed right now,
        oldest position first. Only a resume may spend an approval."""
        stmt = (
            select(Action)
            .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
            .where(
                ApprovalRequest.run_id == run_id,
                ApprovalRequest.status == RESUMING,
                Action.tool_name == tool_name,
                Action.outcome.in_(SPENDABLE_OUTCOMES),
            )
            .order_by(ApprovalRequest.created_at, Action.position)
            # The request comes in the same row; its actions (the gate checks their versions)
            # in one more read.
            .options(contains_eager(Action.request).selectinload(ApprovalRequest.actions))
        )
        return list(self.session.scalars(stmt))

    def of_call(
        self, *, run_id: str, tool_name: str, tool_call_id: str
    ) -> list[tuple[Action, ActionExecution]]:
        """What this very call already spent, whatever its request's status: a node that
        raised a second interrupt runs again from its start on the next resume."""
        stmt = (
            select(Action, ActionExecution)
            .join(ActionExecution, ActionExecution.action_id == Action.id)
            .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
            .where(
                ApprovalRequest.run_id == run_id,
                Action.tool_name == tool_name,
                ActionExecution.tool_call_id == tool_call_id,
            )
            .options(contains_eager(Action.request))
        )
        return [(row[0], row[1]) for row in self.session.execute(stmt).all()]

    def of_actions(self, action_ids: list[str]) -> dict[str, ActionExecution]:
        """The execution records of these actions, by action id (absent: never started)."""
        if not action_ids:
            return {}
        stmt = select(ActionExecution).where(ActionExecution.action_id.in_(action_ids))
        return {row.action_id: row for row in self.session.scalars(stmt)}

    def start(self, action: Action, *, key: str, tool_call_id: str | None) -> bool:
        """Spend the action for this tool call; False if another call spent it first. One
        conditional insert that reads nothing first: under READ COMMITTED (PostgreSQL's
        default) a spend racing it waits for its commit, then inserts nothing. Sent on the
        transaction's connection, without the ORM's flush: nothing the gate has pending may
        be needed by it."""
        dialect = self.session.connection().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        stmt = (
            insert(ActionExecution)
            .values(
                action_id=action.id,
                idempotency_key=key,
                tool_call_id=tool_call_id,
                tool=action.tool_name,
                started_at=utcnow(),
            )
            .on_conflict_do_nothing()
            .returning(ActionExecution.action_id)
        )
        return self.session.connection().execute(stmt).first() is not None

    def finish(self, action_id: str, *, result: str) -> None:
        """Keep the effect's result, once: the first result kept stands."""
        stmt = (
            update(ActionExecution)
            .where(ActionExecution.action_id == action_id, ActionExecution.result.is_(None))
            .values(result=result, finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        self.session.execute(stmt)
