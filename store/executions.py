"""Executions of approved actions: the store side of the point-of-effect gate."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, contains_eager

from store.models import Action, ActionExecution, ApprovalRequest, utcnow
from store.statuses import RUNS_THE_TOOL, RequestStatus

SPENDABLE_OUTCOMES = RUNS_THE_TOOL
RESUMING = RequestStatus.RESUMING


# Built once (a gated tool sends them at every point of effect, on the click's path), with their
# values as parameters.
_OF_CALL = (
    select(Action, ActionExecution)
    .join(ActionExecution, ActionExecution.action_id == Action.id)
    .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
    .where(
        ApprovalRequest.run_id == bindparam("run"),
        Action.tool_name == bindparam("tool"),
        ActionExecution.tool_call_id == bindparam("call"),
    )
    .options(contains_eager(Action.request))
)
_FOR_CALL = (
    select(Action, ActionExecution)
    .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
    .outerjoin(ActionExecution, ActionExecution.action_id == Action.id)
    .where(
        ApprovalRequest.run_id == bindparam("run"),
        Action.tool_name == bindparam("tool"),
        or_(
            and_(ApprovalRequest.status == RESUMING, Action.outcome.in_(SPENDABLE_OUTCOMES)),
            ActionExecution.tool_call_id == bindparam("call"),
        ),
    )
    .order_by(ApprovalRequest.created_at, Action.position)
    # The request comes in the same row; its actions (the gate checks their versions) in one
    # more read (joined, a batch of N calls of one tool would come back as N * N rows).
    .options(contains_eager(Action.request).selectinload(ApprovalRequest.actions))
)
"""A call's first look, in one read: what this very call spent before (as ``_OF_CALL``), and
the approved actions of this run and tool whose request is being resumed right now, oldest
position first (only a resume may spend an approval)."""
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


@dataclass(frozen=True)
class CallRecords:
    """What a gated call finds in one read: what this very call spent before (as
    ``of_call`` reads it), and the approvals it may spend."""

    spent: list[tuple[Action, ActionExecution]]
    spendable: list[Action]


class ExecutionRepository:
    """Takes a session, never commits: the gate owns the transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def for_call(self, *, run_id: str, tool_name: str, tool_call_id: str) -> CallRecords:
        """What a call finds at its first look (``_FOR_CALL``)."""
        values = {"run": run_id, "tool": tool_name, "call": tool_call_id}
        rows = self.session.execute(_FOR_CALL, values).all()
        return CallRecords(
            spent=[(a, e) for a, e in rows if e is not None and e.tool_call_id == tool_call_id],
            spendable=[
                a
                for a, _e in rows
                if a.request.status == RESUMING and a.outcome in SPENDABLE_OUTCOMES
            ],
        )

    def of_call(
        self, *, run_id: str, tool_name: str, tool_call_id: str
    ) -> list[tuple[Action, ActionExecution]]:
        """What this very call already spent, whatever its request's status: a node that
        raised a second interrupt runs again from its start on the next resume."""
        values = {"run": run_id, "tool": tool_name, "call": tool_call_id}
        return [(row[0], row[1]) for row in self.session.execute(_OF_CALL, values).all()]

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
        conn = self.session.connection()
        values = {"spent": action.id, "key": key, "call": tool_call_id, "tool": action.tool_name}
        return (
            conn.execute(_START[conn.dialect.name], {**values, "at": utcnow()}).first() is not None
        )

    def finish(self, action_id: str, *, result: str) -> None:
        """Keep the effect's result, once: the first result kept stands (cleaned as its
        column writes it: one refused would leave the effect looking cut short, and a replay
        of its call would run it again)."""
        values = {"done": action_id, "result": result, "at": utcnow()}
        self.session.connection().execute(_FINISH, values)
