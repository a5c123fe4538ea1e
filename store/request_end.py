"""The statements that write a claimed request's end, built once (every resume sends one), and
what they return. On PostgreSQL the run's end goes in the same statement when the resume ended
the run: one round trip fewer on every approval that ends its run."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sqlalchemy import Select, Update, bindparam, literal_column, select, true, update
from sqlalchemy.sql.elements import Label

from store.models import ApprovalRequest
from store.pending_reads import RunRecord
from store.run_repository import finish_statement
from store.statuses import RequestStatus


@dataclass(frozen=True)
class CardPlace:
    """Where a request's card is, as its row says now."""

    channel: str | None
    ts: str | None


@dataclass(frozen=True)
class Closed:
    """A request's end as written: where its card is now and, when its run ended with it, the
    run's other pending approvals (their rows locked, after its own) and the run as its end
    left it (None if it had ended before: that end stands)."""

    card: CardPlace
    others: tuple[str, ...] = ()
    run: RunRecord | None = None


OTHERS_PENDING: Label[list[str]] = literal_column(
    "ARRAY(SELECT o.id FROM approval_requests AS o WHERE o.run_id = approval_requests.run_id"
    f" AND o.status = '{RequestStatus.PENDING.value}' AND o.id <> approval_requests.id"
    " ORDER BY o.id FOR NO KEY UPDATE)"
).label("others")
"""The run's other pending approvals, locked (as ``lock_open_of_run`` does) by the statement
that closes a request, after its own row."""


def _closing(*returned: Label[list[str]]) -> Update:
    """The request's end, written only if it is still resuming (a cancel, or a process that
    took its claim over, may have recorded an end first: that one stands). Parameters:
    ``closing`` (its id), ``status``, ``outcome``, ``at``."""
    return (
        update(ApprovalRequest)
        .where(
            ApprovalRequest.id == bindparam("closing"),
            ApprovalRequest.status == RequestStatus.RESUMING,
        )
        .values(
            status=bindparam("status"),
            outcome=bindparam("outcome"),
            resolved_at=bindparam("at"),
            claimed_by=None,
            claim_expires_at=None,
        )
        .returning(
            ApprovalRequest.card_channel, ApprovalRequest.card_ts, ApprovalRequest.run_id, *returned
        )
    )


def _closing_with_its_run() -> Select[tuple[object, ...]]:
    """PostgreSQL: the request's end, then its run's (``end``, ``text``). The run's update
    finds its row through the request's, so the request's row lock (and its other pending
    approvals') comes first: the lock order of every transaction. A run that had ended keeps
    its end: no run columns come back (they are NULL). The run's are named ``ended_...``:
    nothing the request's end returns can be taken for them."""
    closed = _closing(OTHERS_PENDING).cte("closed")
    ended = finish_statement(select(closed.c.run_id).scalar_subquery()).cte("ended")
    run = [ended.c[name].label(label) for name, label in zip(_RUN_FIELDS, RUN_COLUMNS, strict=True)]
    return select(closed, *run).select_from(closed.outerjoin(ended, true()))


_RUN_FIELDS = tuple(f.name for f in fields(RunRecord))
RUN_COLUMNS = tuple(f"ended_{name}" for name in _RUN_FIELDS)
"""The run's columns in ``CLOSE_WITH_ITS_RUN``'s rows, in ``RunRecord``'s order."""
CLOSE = _closing()
CLOSE_WITH_ITS_RUN = _closing_with_its_run()
