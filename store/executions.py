"""Executions of approved actions: the store side of the point-of-effect gate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, bindparam, exists, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from store.models import Action, ActionExecution, ApprovalRequest, utcnow
from store.statuses import RUNS_THE_TOOL, RequestStatus

SPENDABLE_OUTCOMES = RUNS_THE_TOOL
RESUMING = RequestStatus.RESUMING


# Built once (a gated tool sends it at its first look, on the click's path), with its values as
# parameters. Plain rows: the ORM's objects for the same statement took about twice its time.
_SIBLING = aliased(Action)
_SPENT = aliased(ActionExecution)
_CALL_ROWS = (
    select(
        Action.id,
        Action.tool_name,
        Action.tool_call_id,
        Action.operation_id,
        Action.action_hash,
        Action.current_hash,
        Action.outcome,
        Action.tool_version,
        Action.schema_version,
        ApprovalRequest.id.label("request_id"),
        ApprovalRequest.status.label("request_status"),
        ApprovalRequest.policy_version,
        ApprovalRequest.team_id,
        ApprovalRequest.environment,
        ActionExecution.idempotency_key,
        ActionExecution.tool_call_id.label("spent_by"),
        ActionExecution.result,
    )
    .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
    .outerjoin(ActionExecution, ActionExecution.action_id == Action.id)
    .where(
        ApprovalRequest.run_id == bindparam("run"),
        or_(
            ApprovalRequest.status == RESUMING,
            exists().where(
                _SIBLING.request_id == ApprovalRequest.id,
                _SIBLING.tool_name == bindparam("tool"),
                _SPENT.action_id == _SIBLING.id,
                _SPENT.tool_call_id == bindparam("call"),
            ),
        ),
    )
    .order_by(ApprovalRequest.created_at, Action.position, ApprovalRequest.id)
)
"""Every action of the run's requests that a call may spend from (being resumed) or spent
from before (whatever their status now: a node that raised a second interrupt runs again
from its start on the next resume), with its request and its execution record if any. The
other actions come along for their versions (an approval holds only while none changed)."""
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


@dataclass(frozen=True, slots=True)
class ReviewedVersions:
    """One action's tool and argument schema versions, as reviewed."""

    tool_name: str
    tool_version: str | None
    schema_version: str | None


@dataclass(frozen=True, slots=True)
class GatedRequest:
    """An approval request as a gated call reads it: what its approvals bind to."""

    status: str
    policy_version: str
    team_id: str | None
    environment: str | None
    actions: tuple[ReviewedVersions, ...]


@dataclass(frozen=True, slots=True)
class GatedAction:
    """An approved (or once approved) action as a gated call reads it. ``bound_hash``: what
    approvals bind to, as ``Action.bound_hash``."""

    id: str
    tool_name: str
    tool_call_id: str | None
    operation_id: str
    bound_hash: str
    outcome: str | None
    request: GatedRequest


@dataclass(frozen=True, slots=True)
class Spend:
    """A call's execution record of an action: the key it ran under, and its result once
    kept (none: cut short, or still running)."""

    idempotency_key: str
    result: str | None


@dataclass(frozen=True)
class CallRecords:
    """What a gated call finds in one read: what this very call spent before (whatever its
    request's status now), and the approvals it may spend; oldest request, then lowest
    position, first."""

    spent: list[tuple[GatedAction, Spend]]
    spendable: list[GatedAction]


def _records(
    rows: Sequence[Row[*tuple[Any, ...]]], *, tool_name: str, tool_call_id: str
) -> CallRecords:
    """``_CALL_ROWS``' rows as the gate reads them: each request once, with the versions of
    all its actions; the call's own tool's actions, spent by it or spendable."""
    versions: dict[str, list[ReviewedVersions]] = {}
    for row in rows:
        kept = ReviewedVersions(row.tool_name, row.tool_version, row.schema_version)
        versions.setdefault(row.request_id, []).append(kept)
    requests: dict[str, GatedRequest] = {}
    spent: list[tuple[GatedAction, Spend]] = []
    spendable: list[GatedAction] = []
    for row in rows:
        if row.tool_name != tool_name:
            continue  # came along for its versions
        request = requests.get(row.request_id)
        if request is None:
            request = requests[row.request_id] = GatedRequest(
                status=row.request_status,
                policy_version=row.policy_version,
                team_id=row.team_id,
                environment=row.environment,
                actions=tuple(versions[row.request_id]),
            )
        action = GatedAction(
            id=row.id,
            tool_name=row.tool_name,
            tool_call_id=row.tool_call_id,
            operation_id=row.operation_id,
            bound_hash=row.current_hash or row.action_hash,
            outcome=row.outcome,
            request=request,
        )
        # idempotency_key is never null in a record: none, no record (the outer join's)
        if row.idempotency_key is not None and row.spent_by == tool_call_id:
            spent.append((action, Spend(row.idempotency_key, row.result)))
        if request.status == RESUMING and action.outcome in SPENDABLE_OUTCOMES:
            spendable.append(action)
    return CallRecords(spent=spent, spendable=spendable)


class ExecutionRepository:
    """Takes a session, never commits: the gate owns the transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def for_call(self, *, run_id: str, tool_name: str, tool_call_id: str) -> CallRecords:
        """What a call finds (``_CALL_ROWS``), in one read of what is committed and flushed:
        at its first look, and again after a spend it lost to another."""
        values = {"run": run_id, "tool": tool_name, "call": tool_call_id}
        rows = self.session.connection().execute(_CALL_ROWS, values).all()
        return _records(rows, tool_name=tool_name, tool_call_id=tool_call_id)

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
