"""What a gated call reads before its effect: its run's status and the kill switch, held
until the spend commits, with what the call spent before and what it may spend; on PostgreSQL
in one statement, each a round trip on the reviewer's wait."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, bindparam, exists, or_, select, true
from sqlalchemy.orm import Session, aliased

from store.control_models import ExecutionSwitch
from store.executions import RESUMING, SPENDABLE_OUTCOMES
from store.models import Action, ActionExecution, ApprovalRequest, Run
from store.run_repository import RunRepository
from store.switch import SWITCH_ID, SwitchRepository, SwitchState, remember_held

# Built once (a gated tool reads them at every point of effect, on the click's path), with
# their values as parameters. Plain rows: ORM objects for the same rows took about twice the
# statement's time.
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
        ApprovalRequest.created_at.label("request_created_at"),
        Action.position,
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
    rows: Sequence[Row[*tuple[Any, ...]]], tool_name: str, tool_call_id: str
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


_CALLS = _CALL_ROWS.subquery("calls")
_HELD_RUN = (
    select(Run.status)
    .where(Run.id == bindparam("run"))
    .with_for_update(read=True)
    .cte("held_run")
    .prefix_with("MATERIALIZED")
)
_HELD_SWITCH = (
    select(
        ExecutionSwitch.paused,
        ExecutionSwitch.reason,
        ExecutionSwitch.changed_by,
        ExecutionSwitch.changed_at,
    )
    # Refers to the held run: taken once the run's row is held (the order every holder of
    # both takes them in), and not at all without a run.
    .where(ExecutionSwitch.id == SWITCH_ID, exists(select(_HELD_RUN.c.status)))
    .with_for_update(read=True)
    .cte("held_switch")
    .prefix_with("MATERIALIZED")
)
_FIRST_LOOK = (
    select(
        _HELD_RUN.c.status.label("run_status"),
        _HELD_SWITCH.c.paused,
        _HELD_SWITCH.c.reason,
        _HELD_SWITCH.c.changed_by,
        _HELD_SWITCH.c.changed_at,
        *_CALLS.c,
    )
    .select_from(_HELD_RUN)
    .outerjoin(_HELD_SWITCH, true())
    .outerjoin(_CALLS, true())
    .order_by(_CALLS.c.request_created_at, _CALLS.c.position, _CALLS.c.request_id)
)
"""PostgreSQL: the run's row held (a cancel or an end of the run commits before this or
waits for the spend), then the switch, then ``_CALL_ROWS``, in one statement. Its snapshot is
taken before any wait for those locks: the run and the switch are read as they are once held
(a cancel, an end or a pause committed meanwhile refuses the call), the call's rows as they
were before the wait. Only writers of the run's row make it wait, and none of them spends or
keeps a result; a spend of the same action committed meanwhile is found by the spend's
conflict and read again (the same call run twice at once, with no approval reviewed as that
very call, can still spend two identical approvals, as before: the gate's spend)."""


@dataclass(frozen=True)
class FirstLook:
    """A gated call's first look: its run's status (None: no such run), the kill switch, both
    held until the transaction ends, and what the call may spend or spent before."""

    run_status: str | None
    switch: SwitchState
    records: CallRecords


class CallLooks:
    """Takes a session, never commits: the gate owns the transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def first(self, *, run_id: str, tool_name: str, tool_call_id: str) -> FirstLook:
        """Hold the run's row and the switch, and read what the call finds (``_FIRST_LOOK``;
        on SQLite, whose write lock is held, three reads)."""
        values = {"run": run_id, "tool": tool_name, "call": tool_call_id}
        conn = self.session.connection()
        if conn.dialect.name != "postgresql":
            status = RunRepository(self.session).status(run_id, hold=True)
            switch = SwitchRepository(self.session).state(hold=True)
            return FirstLook(status, switch, self.again(**values))
        rows = conn.execute(_FIRST_LOOK, values).all()
        if not rows:  # no such run: nothing held, the switch read on its own
            switch = SwitchRepository(self.session).state(hold=True)
            return FirstLook(None, switch, CallRecords(spent=[], spendable=[]))
        first = rows[0]
        switch = (
            SwitchState(first.paused, first.reason, first.changed_by, first.changed_at)
            if first.paused is not None
            else SwitchState(paused=False)  # a database migrated without the row: running
        )
        remember_held(self.session, switch)
        calls = [row for row in rows if row.id is not None]
        return FirstLook(first.run_status, switch, _records(calls, tool_name, tool_call_id))

    def again(self, *, run: str, tool: str, call: str) -> CallRecords:
        """What the call finds now (``_CALL_ROWS``): after a spend it lost to another, what
        that one committed."""
        values = {"run": run, "tool": tool, "call": call}
        return _records(self.session.connection().execute(_CALL_ROWS, values).all(), tool, call)
