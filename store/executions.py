"""Executions of approved actions: the store side of the point-of-effect gate."""

from __future__ import annotations

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from store.models import ActionExecution, utcnow
from store.statuses import RUNS_THE_TOOL, RequestStatus

SPENDABLE_OUTCOMES = RUNS_THE_TOOL
RESUMING = RequestStatus.RESUMING


_START = {
    dialect: insert(ActionExecution)
    .values(
        action_id=bindparam("spent"),
        idempotency_key=bindparam("key"),
        tool_call_id=bindparam("call"),
        tool=bindparam("tool"),
        started_at=bindparam("at"),
    )
    .on_conflict_do_nothing()
    .returning(ActionExecution.action_id)
    for dialect, insert in (("postgresql", postgresql.insert), ("sqlite", sqlite.insert))
}
_FINISH = (
    update(ActionExecution)
    .where(ActionExecution.action_id == bindparam("done"), ActionExecution.result.is_(None))
    .values(result=bindparam("result"), finished_at=bindparam("at"))
)


class ExecutionRepository:
    """Takes a session, never commits: the gate owns the transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def of_actions(self, action_ids: list[str]) -> dict[str, ActionExecution]:
        """The execution records of these actions, by action id (absent: never started)."""
        if not action_ids:
            return {}
        stmt = select(ActionExecution).where(ActionExecution.action_id.in_(action_ids))
        return {row.action_id: row for row in self.session.scalars(stmt)}

    def start(self, action_id: str, *, tool: str, key: str, tool_call_id: str | None) -> bool:
        """Spend the action for this tool call; False if another call spent it first. One
        conditional insert that reads nothing first: under READ COMMITTED (PostgreSQL's
        default) a spend racing it waits for its commit, then inserts nothing. Sent on the
        transaction's connection, without the ORM's flush: nothing the gate has pending may
        be needed by it."""
        conn = self.session.connection()
        values = {"spent": action_id, "key": key, "call": tool_call_id, "tool": tool}
        return (
            conn.execute(_START[conn.dialect.name], {**values, "at": utcnow()}).first() is not None
        )

    def finish(self, action_id: str, *, result: str) -> None:
        """Keep the effect's result, once: the first result kept stands (cleaned as its
        column writes it: one refused would leave the effect looking cut short, and a replay
        of its call would run it again)."""
        values = {"done": action_id, "result": result, "at": utcnow()}
        self.session.connection().execute(_FINISH, values)
