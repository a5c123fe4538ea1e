"""A run's row: its status, its result text, and whether the result reached its thread."""

from __future__ import annotations

import datetime as dt
from dataclasses import fields

from sqlalchemy import ColumnElement, Update, bindparam, select, update
from sqlalchemy.orm import Session

from store.clean import clean_text
from store.db import affected
from store.models import Run, utcnow
from store.pending_reads import RunRecord
from store.statuses import UNFINISHED_RUN


def finish_statement(run_id: ColumnElement[str]) -> Update:
    """A run's end: its status, text and time as parameters (``end``, ``text``, ``at``), and
    the run as it is then. A run ends once: the first end written stands (completed, failed
    or cancelled), and its thread is told only that one."""
    return (
        update(Run)
        .where(Run.id == run_id, Run.status.in_(UNFINISHED_RUN))
        .values(status=bindparam("end"), result_text=bindparam("text"), updated_at=bindparam("at"))
        .returning(*(getattr(Run, f.name) for f in fields(RunRecord)))
    )


_FINISH = finish_statement(bindparam("finished_run"))
"""Built once: every approval that ends a run sends it (on PostgreSQL inside the statement
that closes its request: ``store.request_end``)."""


_STATUS = select(Run.status).where(Run.id == bindparam("run"))
_STATUS_HELD = _STATUS.with_for_update(read=True)
_RESULT_POSTED = (
    update(Run)
    .where(Run.id == bindparam("posted_run"), Run.result_posted.is_(False))
    .values(result_posted=True)
)
_TOUCH = (
    update(Run)
    .where(Run.id == bindparam("touched"), Run.status.in_(UNFINISHED_RUN))
    .values(updated_at=bindparam("at"))
)
_RESULT_NOT_POSTED = (
    update(Run)
    .where(Run.id == bindparam("unposted_run"))
    .values(result_posted=False, updated_at=bindparam("at"))
)


class RunRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, run: Run) -> Run:
        self.session.add(run)
        self.session.flush()
        return run

    def get(self, run_id: str, *, for_update: bool = False) -> Run | None:
        """``for_update`` locks the run's row and reads it fresh (lock order: a run's request
        rows first, then the run, then the audit chain)."""
        if not for_update:
            return self.session.get(Run, run_id)
        stmt = (
            select(Run)
            .where(Run.id == run_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).one_or_none()

    def status(self, run_id: str, *, hold: bool = False) -> str | None:
        """The run's status; ``hold`` keeps a shared lock on its row until the transaction
        ends, so nobody changes the status meanwhile (PostgreSQL; SQLite writes one at a
        time). A gated call holds it with the kill switch: ``call_looks``."""
        stmt = _STATUS_HELD if hold else _STATUS
        return self.session.connection().execute(stmt, {"run": run_id}).scalar()

    def mark_result_posted(self, run_id: str) -> bool:
        """Remember the run's result reached its thread; ``True`` for the one caller whose
        update changed it (so one replica posts a missing result)."""
        result = self.session.connection().execute(_RESULT_POSTED, {"posted_run": run_id})
        return affected(result) > 0

    def put_back(self, run_id: str, *, at: dt.datetime) -> None:
        """A waiting run whose next step could not be recorded: counted as waiting since
        ``at``, so maintenance tries the others first and this one again once it settled."""
        self.touch(run_id, at=at)

    def touch(self, run_id: str, *, at: dt.datetime) -> bool:
        """Count an unfinished run as changed ``at`` (maintenance counts its lease from it);
        ``False`` if it has ended."""
        result = self.session.connection().execute(_TOUCH, {"touched": run_id, "at": at})
        return affected(result) > 0

    def forget_result_posted(self, run_id: str, *, at: dt.datetime) -> None:
        """A retry that won the mark but could not post: leave the result to be posted, as
        changed ``at``, so the next tries go to the others first and to this one once it
        settled again (a channel archived for good is not tried at every round)."""
        values = {"unposted_run": run_id, "at": at}
        self.session.connection().execute(_RESULT_NOT_POSTED, values)

    def finish(self, run_id: str, *, status: str, result_text: str) -> RunRecord | None:
        """Record a run's end in one Core statement, which reads nothing first and takes the
        row's lock; the run as it is now (what its thread is told), or None if it is gone or
        already ended (by a cancel, or another end: the first stands). Lock order: any of its
        request rows before this, the audit chain after."""
        text = clean_text(result_text)  # an agent's text may hold what PostgreSQL refuses
        values = {"finished_run": run_id, "end": status, "text": text, "at": utcnow()}
        row = self.session.connection().execute(_FINISH, values).one_or_none()
        return None if row is None else RunRecord(*row)

    def set_status(self, run: Run, status: str, *, result_text: str | None = None) -> None:
        run.status = status
        run.updated_at = utcnow()
        if result_text is not None:
            run.result_text = result_text
