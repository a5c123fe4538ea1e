"""Open review slots: one row per (open action, approver role) of a pending request.

"What waits on me" reads this small table instead of scanning every action's JSON roles
(``pending_reads.waiting_on``).
The rows follow the requests and actions a transaction changed when it commits
(:func:`_follow_flush`, :func:`_write_slots`), whoever changed them through the ORM; the
store's Core statements that move a request out of ``pending`` call :func:`close_request`
(or, when the statement deleted the slots itself, :func:`closed_with`), and those that write an
action's outcome :func:`action_changed`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from sqlalchemy import (
    CTE,
    Connection,
    bindparam,
    delete,
    event,
    insert,
    inspect,
    or_,
    select,
    true,
)
from sqlalchemy.orm import Session, SessionTransaction, UOWTransaction
from sqlalchemy.sql.elements import ColumnElement

from store.models import Action, ApprovalRequest, PendingSlot
from store.statuses import RequestStatus

# Attributes that decide whether, and how, an action is listed.
_REQUEST_FIELDS = ("status", "expires_at", "requester_id")
_ACTION_FIELDS = ("outcome", "approver_roles")
_TOUCHED_INFO = "pending_slots_touched"  # ``Session.info``: ids to rewrite at commit
APPROVING = ("approve", "edit")
"""Decision types that count as an approval (a reviewer who gave one is not asked again)."""


_DROP_SLOTS = delete(PendingSlot).where(PendingSlot.request_id == bindparam("closed_request"))


def close_request(session: Session, request_id: str) -> None:
    """The request left ``pending`` by a bulk UPDATE, which the flush hook cannot see. Its
    slots are gone now, so the commit need not rewrite them (nor its actions')."""
    session.connection().execute(_DROP_SLOTS, {"closed_request": request_id})
    closed_with(session, request_id)


def closed_with(session: Session, request_id: str) -> None:
    """The request's slots were deleted by the statement that took it out of ``pending``
    (``dropping_slots``): the commit need not rewrite them (nor its actions')."""
    within = session.get_nested_transaction() or session.get_transaction()
    _touched(session).closed[request_id] = within


def dropping_slots(closing: CTE) -> CTE:
    """A DELETE of the slots of the requests ``closing`` returns (their ``id``), to go in the
    same statement as the UPDATE that closes them (PostgreSQL)."""
    gone = select(closing.c.id)
    return delete(PendingSlot).where(PendingSlot.request_id.in_(gone)).cte("slots_dropped")


def action_changed(session: Session, *, action_id: str, request_id: str) -> None:
    """An action's outcome written by a Core UPDATE, which the flush hook cannot see: its
    slots are rewritten at the commit (none, if its request was closed meanwhile)."""
    _touched(session).actions[action_id] = request_id


def rebuild(session: Session) -> int:
    """Recompute every slot from the requests and actions (after a bulk load); rows written."""
    conn = session.connection()
    conn.execute(delete(PendingSlot))
    return _insert_open(conn, true())


def _changed(obj: object, fields: Iterable[str]) -> bool:
    attrs = inspect(obj).attrs
    return any(getattr(attrs, name).history.has_changes() for name in fields)


@event.listens_for(Session, "after_flush")
def _follow_flush(session: Session, flush_context: UOWTransaction) -> None:
    """Note every request or action this flush added or changed; their slots are rewritten
    once, when the transaction commits (:func:`_write_slots`)."""
    requests: set[str] = set()
    actions: dict[str, str] = {}  # action id -> its request's id
    for obj in session.new:
        if isinstance(obj, ApprovalRequest):
            requests.add(obj.id)
        elif isinstance(obj, Action):
            actions[obj.id] = obj.request_id
    for obj in session.dirty:
        if isinstance(obj, ApprovalRequest) and _changed(obj, _REQUEST_FIELDS):
            if _pending_before_or_after(obj):
                requests.add(obj.id)
        elif isinstance(obj, Action) and _changed(obj, _ACTION_FIELDS):
            actions[obj.id] = obj.request_id
    if requests or actions:
        touched = _touched(session)
        touched.requests.update(requests)
        for request_id in requests:  # changed again after its close
            touched.closed.pop(request_id, None)
        touched.actions.update(actions)


def _pending_before_or_after(request: ApprovalRequest) -> bool:
    """Only a pending request has slots: one that neither was nor is pending (resuming ->
    resolved, say) has none to rewrite. An earlier status that was never loaded counts as
    pending."""
    if request.status == RequestStatus.PENDING:
        return True
    history = inspect(request).attrs.status.history
    if not history.has_changes():
        return False
    return not history.deleted or RequestStatus.PENDING in history.deleted


@dataclass
class _Touched:
    transaction: object
    requests: set[str] = field(default_factory=set)
    actions: dict[str, str] = field(default_factory=dict)  # action id -> request id
    closed: dict[str, object] = field(default_factory=dict)
    released: list[object] = field(default_factory=list)  # savepoints released so far
    """Requests a bulk UPDATE took out of ``pending`` (``close_request``, ``closed_with``)
    and nothing changed since: no slots to write back. Each with the (sub)transaction that
    closed it: a savepoint rolled back takes its closes with it."""

    def to_refresh(self) -> tuple[set[str], set[str]]:
        """The requests and actions whose slots the commit rewrites."""
        requests = self.requests - self.closed.keys()
        actions = {a for a, request in self.actions.items() if request not in self.closed}
        return requests, actions


def _touched(session: Session) -> _Touched:
    """What this transaction touched so far (a rolled-back transaction's notes are dropped)."""
    transaction = session.get_transaction()
    held = session.info.get(_TOUCHED_INFO)
    if not isinstance(held, _Touched) or held.transaction is not transaction:
        held = session.info[_TOUCHED_INFO] = _Touched(transaction)
    return held


@event.listens_for(Session, "after_soft_rollback")
def _forget_rolled_back_closes(session: Session, previous: SessionTransaction) -> None:
    """A savepoint rolled back undid the closes made in it (and in savepoints inside it).
    ``previous`` may be a failed flush's subtransaction: what the database rolled back is the
    savepoint (or transaction) around it."""
    held = session.info.get(_TOUCHED_INFO)
    undone = previous
    while undone.parent is not None and not undone.nested:
        undone = undone.parent
    if not undone.nested or not isinstance(held, _Touched):
        return
    for request_id, within in list(held.closed.items()):
        if _inside(within, undone):
            del held.closed[request_id]


def _inside(transaction: object, savepoint: SessionTransaction) -> bool:
    current = transaction if isinstance(transaction, SessionTransaction) else None
    while current is not None:
        if current is savepoint:
            return True
        current = current.parent
    return False


@event.listens_for(Session, "after_transaction_end")
def _forget_closes_of_a_closed_savepoint(session: Session, ending: SessionTransaction) -> None:
    """A savepoint that ends without being released was rolled back (``close()`` says so with
    no rollback event): the closes made in it are undone."""
    held = session.info.get(_TOUCHED_INFO)
    if not ending.nested or not isinstance(held, _Touched):
        return
    if any(released is ending for released in held.released):
        return
    for request_id, within in list(held.closed.items()):
        if _inside(within, ending):
            del held.closed[request_id]


@event.listens_for(Session, "before_commit")
def _write_slots(session: Session) -> None:
    """Rewrite the slots of what the transaction touched, in it, once: a transaction may
    change an action and its request in several flushes or statements, and each rewrite costs
    two statements."""
    if session.in_nested_transaction():
        held = session.info.get(_TOUCHED_INFO)
        if isinstance(held, _Touched):
            held.released.append(session.get_nested_transaction())
        return
    session.flush()
    held = session.info.pop(_TOUCHED_INFO, None)
    if isinstance(held, _Touched) and held.transaction is session.get_transaction():
        requests, actions = held.to_refresh()
        if requests or actions:
            _refresh(session.connection(), requests=requests, actions=actions)


def _refresh(conn: Connection, *, requests: Collection[str], actions: Collection[str]) -> None:
    """Drop the touched slots and write back those the stored state still opens."""
    touched = or_(PendingSlot.request_id.in_(requests), PendingSlot.action_id.in_(actions))
    conn.execute(delete(PendingSlot).where(touched))
    _insert_open(conn, or_(Action.request_id.in_(requests), Action.id.in_(actions)))


def _insert_open(conn: Connection, which: ColumnElement[bool]) -> int:
    stmt = (
        select(
            Action.id,
            Action.request_id,
            Action.approver_roles,
            ApprovalRequest.expires_at,
            ApprovalRequest.requester_id,
            ApprovalRequest.created_at,
        )
        .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
        .where(ApprovalRequest.status == RequestStatus.PENDING, Action.outcome.is_(None), which)
    )
    rows = [
        {
            "action_id": action_id,
            "role": role,
            "request_id": request_id,
            "expires_at": expires_at,
            "requester_id": requester_id,
            "created_at": created_at,
        }
        for action_id, request_id, roles, expires_at, requester_id, created_at in conn.execute(stmt)
        for role in sorted(set(roles or ()))
    ]
    if rows:
        conn.execute(insert(PendingSlot), rows)
    return len(rows)
