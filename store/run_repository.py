"""A run's row: its status, its result text, and whether the result reached its thread."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from store.db import affected
from store.models import Run, utcnow


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
        ends, so nobody changes the status meanwhile (PostgreSQL; SQLite writes one at a time)."""
        stmt = select(Run.status).where(Run.id == run_id)
        return self.session.scalar(stmt.with_for_update(read=True) if hold else stmt)

    def mark_result_posted(self, run_id: str) -> bool:
        """Remember the run's result reached its thread; ``True`` for the one caller whose
        update changed it (so one replica posts a missing result)."""
        result = self.session.execute(
            update(Run)
            .where(Run.id == run_id, Run.result_posted.is_(False))
            .values(result_posted=True)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def set_status(self, run: Run, status: str, *, result_text: str | None = None) -> None:
        run.status = status
        run.updated_at = utcnow()
        if result_text is not None:
            run.result_text = result_text
