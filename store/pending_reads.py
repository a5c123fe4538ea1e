"""A reviewer's pending requests read as plain rows: the list is read on every Home tab, and
loading ORM objects (identity map, unit-of-work bookkeeping) cost as much as the query itself.

The records carry what a view of a request shows, nothing more, and are never written back.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import Integer, Select, and_, bindparam, func, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import BindParameter, ColumnElement

from store.models import Action, ApprovalRequest, Base, Decision, PendingSlot, Run
from store.pending_slots import APPROVING
from store.statuses import RequestStatus


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    reviewer_id: str
    type: str
    message: str | None
    created_at: dt.datetime
    action_hash: str


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """JSON columns hold what the ORM would give (lists and dicts): read them, never change."""

    # First the fields that are not columns of the row (read apart), then the columns.
    bound_hash: str
    """As ``Action.bound_hash``: the edited version's hash, else the original one."""
    decisions: tuple[DecisionRecord, ...]
    """Oldest first, as ``Action.decisions``."""
    id: str
    position: int
    tool_name: str
    args: dict[str, Any]
    description: str
    risk: str
    allowed_decisions: list[Any]
    approver_roles: list[Any]
    approvals_required: int
    operation_id: str
    outcome: str | None
    exempt: bool
    edited_args: dict[str, Any] | None
    extra: dict[str, Any] | None
    tool_call_id: str | None
    tool_version: str | None


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    requester_id: str
    channel_id: str
    thread_ts: str | None
    request_text: str
    status: str
    result_text: str | None
    cancelled_by: str | None
    cancelled_at: dt.datetime | None
    team_id: str | None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    # First the fields that are not columns of the row (read apart), then the columns.
    run: RunRecord
    actions: tuple[ActionRecord, ...]
    """By position, as ``ApprovalRequest.actions``."""
    id: str
    status: str
    outcome: str | None
    interrupt_id: str
    policy_version: str
    requester_id: str
    expires_at: dt.datetime
    card_channel: str | None
    card_ts: str | None
    review_channel: str | None
    digest_channel: str | None
    environment: str | None


_DERIVED = {"bound_hash", "decisions", "run", "actions"}


def _columns(model: type[Base], record: type[Any]) -> list[InstrumentedAttribute[Any]]:
    """The model's columns named as the record's column fields, in their order: a row's slice
    is then the record's trailing positional arguments."""
    return [getattr(model, f.name) for f in fields(record) if f.name not in _DERIVED]


_REQUEST = _columns(ApprovalRequest, RequestRecord)
_RUN = _columns(Run, RunRecord)
_ACTION = _columns(Action, ActionRecord)
_DECISION = _columns(Decision, DecisionRecord)
# Row layout: request | run | action | current hash, original hash | decision id | decision.
_AT_RUN = len(_REQUEST)
_AT_ACTION = _AT_RUN + len(_RUN)
_AT_HASHES = _AT_ACTION + len(_ACTION)
_AT_DECISION = _AT_HASHES + 3


def waiting_on(*, paged: bool) -> Select[str, dt.datetime]:
    """(request id, created at) of pending requests with an open action a reviewer may decide,
    oldest first: through their roles on others' requests, through their own roles on their
    own, and never an action they already approved in its current version. Reads only the
    slots (the role index) and probes the decisions by action.

    Its values are bound when it runs (:func:`waiting_on_params`): a statement of each shape
    is built, and keyed for the compiled cache, once; a listing runs often and building a
    statement cost as much as the database answering it. ``paged``: only requests listed after
    the ``after`` parameter (a request id: the next page)."""
    reviewer = bindparam("reviewer", type_=PendingSlot.requester_id.type)
    approved = (
        select(Decision.id)
        .join(Action, Action.id == Decision.action_id)
        .where(
            Decision.action_id == PendingSlot.action_id,
            Decision.reviewer_id == reviewer,
            Decision.type.in_(APPROVING),
            Decision.action_hash == func.coalesce(Action.current_hash, Action.action_hash),
        )
        .exists()
    )
    stmt = select(PendingSlot.request_id, PendingSlot.created_at).where(
        or_(
            and_(
                PendingSlot.role.in_(bindparam("roles", expanding=True)),
                PendingSlot.requester_id != reviewer,
            ),
            and_(
                PendingSlot.role.in_(bindparam("own_roles", expanding=True)),
                PendingSlot.requester_id == reviewer,
            ),
        ),
        ~approved,
    )
    if paged:
        stmt = stmt.where(_listed_after(bindparam("after", type_=PendingSlot.request_id.type)))
    order = stmt.distinct().order_by(PendingSlot.created_at, PendingSlot.request_id)
    return order.limit(bindparam("limit", type_=Integer()))


def waiting_on_params(
    *,
    reviewer: str,
    roles: Iterable[str],
    own_roles: Iterable[str],
    limit: int,
    after: str | None = None,
) -> dict[str, object]:
    """The values :func:`waiting_on` binds: ``roles`` on others' requests, ``own_roles`` on the
    reviewer's own; ``after`` only for a paged statement."""
    params: dict[str, object] = {
        "reviewer": reviewer,
        "roles": list(roles),
        "own_roles": list(own_roles),
        "limit": limit,
    }
    if after is not None:
        params["after"] = after
    return params


def _listed_after(request_id: BindParameter[str]) -> ColumnElement[bool]:
    """Keyset paging on (created at, request id): stable while requests come and go. A request
    that is gone (decided since) still has its age in ``approval_requests``."""
    since = (
        select(ApprovalRequest.created_at).where(ApprovalRequest.id == request_id).scalar_subquery()
    )
    return or_(
        PendingSlot.created_at > since,
        and_(PendingSlot.created_at == since, PendingSlot.request_id > request_id),
    )


def _statement(*, paged: bool) -> Select[Any]:
    mine = waiting_on(paged=paged).subquery()
    return (
        select(
            *_REQUEST,
            *_RUN,
            *_ACTION,
            Action.current_hash,
            Action.action_hash,
            Decision.id,
            *_DECISION,
        )
        .select_from(mine)
        .join(ApprovalRequest, ApprovalRequest.id == mine.c.request_id)
        .join(Run, Run.id == ApprovalRequest.run_id)
        .outerjoin(Action, Action.request_id == ApprovalRequest.id)
        .outerjoin(Decision, Decision.action_id == Action.id)
        # The slots are kept exact; this guard costs nothing on the few rows chosen.
        .where(ApprovalRequest.status == RequestStatus.PENDING)
        # The relationships' own orders (actions by position, decisions oldest first); an
        # action's rows stay together even beside another at the same position.
        .order_by(
            mine.c.created_at, mine.c.request_id, Action.position, Action.id, Decision.created_at
        )
    )


# Built once, values bound at each run: see waiting_on.
_FIRST_PAGE, _NEXT_PAGE = _statement(paged=False), _statement(paged=True)


def pending_records(
    session: Session,
    *,
    reviewer: str,
    roles: Iterable[str],
    own_roles: Iterable[str] = (),
    limit: int,
    after: str | None = None,
) -> list[RequestRecord]:
    """Pending requests with an open action ``reviewer`` may decide (``roles`` on others'
    requests, ``own_roles`` on their own, not one they already approved), oldest first,
    listed after the request ``after`` if given; chosen from the open review slots
    (store.pending_slots). One round trip: each with its run, actions and decisions."""
    params = waiting_on_params(
        reviewer=reviewer, roles=roles, own_roles=own_roles, limit=limit, after=after
    )
    stmt = _FIRST_PAGE if after is None else _NEXT_PAGE
    session.flush()  # as an ORM query would (autoflush): the caller's own changes count
    return _assemble(session.connection().execute(stmt, params).all())


def _assemble(rows: Sequence[Sequence[Any]]) -> list[RequestRecord]:
    """Fold the joined rows (one per decision, or per action without any) into records: the
    statement's order keeps each request's rows, and each action's, together."""
    return [_request(list(group)) for _id, group in groupby(rows, key=itemgetter(0))]


def _request(rows: list[Sequence[Any]]) -> RequestRecord:
    first = rows[0]
    with_action = [row for row in rows if row[_AT_ACTION] is not None]  # none: no actions
    actions = tuple(
        _action(list(group)) for _id, group in groupby(with_action, key=itemgetter(_AT_ACTION))
    )
    run = RunRecord(*first[_AT_RUN:_AT_ACTION])
    return RequestRecord(run, actions, *first[:_AT_RUN])


def _action(rows: list[Sequence[Any]]) -> ActionRecord:
    first = rows[0]
    current_hash, action_hash = first[_AT_HASHES], first[_AT_HASHES + 1]
    decisions = tuple(
        DecisionRecord(*row[_AT_DECISION:])
        for row in rows
        if row[_AT_DECISION - 1] is not None  # the decision's id: none on this action
    )
    bound_hash = current_hash or action_hash  # as ``Action.bound_hash``
    return ActionRecord(bound_hash, decisions, *first[_AT_ACTION:_AT_HASHES])
