"""The queries background maintenance runs: what is due (expiry, reminders, cards never
posted), what a dead process left unfinished, and what retention may delete. Read-mostly; the
guarded updates that win races are in ``repositories``."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Select, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from store.models import ApprovalRequest, Run
from store.statuses import FINISHED_RUN, OPEN_REQUEST, UNFINISHED_RUN, RequestStatus, RunStatus

_CARRIED_ON = Run.status.in_((RunStatus.WAITING, RunStatus.RUNNING))
"""A run that maintenance carries on when it has nothing open, has settled and its lock is
free: waiting, or running (its start holds the lock while it posts the thread, and again
until its first stop is recorded)."""


class MaintenanceQueries:
    def __init__(self, session: Session, *, limit: int = 100) -> None:
        self.session = session
        self.limit = limit

    def stale_claims(self, now: dt.datetime) -> list[str]:
        """Requests still resuming after their owner's lease ran out: the owner died."""
        stmt = select(ApprovalRequest.id).where(
            ApprovalRequest.status == RequestStatus.RESUMING,
            ApprovalRequest.claim_expires_at <= now,
        )
        return list(self.session.scalars(stmt.limit(self.limit)))

    def stalled_runs(self, *, settled_before: dt.datetime) -> list[str]:
        """Runs left waiting with no open approval (their next step was never recorded), or
        left running (a process died before its first stop was recorded, before it started
        the agent, or before it posted the run's thread)."""
        stmt = select(Run.id).where(
            _CARRIED_ON,
            Run.updated_at <= settled_before,
            Run.id.not_in(self._open_runs()),
        )
        # Oldest first, and a fixed order: runs that keep failing do not hide the others
        # behind the limit in some order of the database's choosing.
        ordered = stmt.order_by(Run.updated_at, Run.id)
        return list(self.session.scalars(ordered.limit(self.limit)))

    def ended_with_pending(self) -> list[str]:
        """Runs that ended with an approval still pending: ended by an older version, which
        did not close them with the run."""
        stmt = (
            select(ApprovalRequest.run_id)
            .join(Run, Run.id == ApprovalRequest.run_id)
            .where(ApprovalRequest.status == RequestStatus.PENDING, Run.status.in_(FINISHED_RUN))
            .distinct()
        )
        return list(self.session.scalars(stmt.limit(self.limit)))

    def is_stalled(self, run_id: str, *, settled_before: dt.datetime) -> bool:
        """``stalled_runs``' condition for one run, read again under the run's lock (a start
        that posted its thread since the list was read has just touched it)."""
        settled = (Run.id == run_id, _CARRIED_ON, Run.updated_at <= settled_before)
        carried_on = self.session.scalar(select(Run.id).where(*settled))
        open_now = self.session.scalar(
            select(ApprovalRequest.id)
            .where(ApprovalRequest.run_id == run_id, ApprovalRequest.status.in_(OPEN_REQUEST))
            .limit(1)
        )
        return carried_on is not None and open_now is None

    def cards_out_of_date(self) -> list[ApprovalRequest]:
        """Cards whose message shows another status than the request's. While resuming, the
        resumer draws the card itself, unless it may still show the buttons (or what it shows
        is unknown): a resume that died before its first draw (quick resumes draw only their
        end)."""
        stmt = select(ApprovalRequest).where(
            ApprovalRequest.card_ts.is_not(None),
            or_(
                ApprovalRequest.status != RequestStatus.RESUMING,
                ApprovalRequest.card_status == RequestStatus.PENDING,
                ApprovalRequest.card_status.is_(None),
            ),
            or_(
                ApprovalRequest.card_status.is_(None),
                ApprovalRequest.card_status != ApprovalRequest.status,
            ),
        )
        return list(self.session.scalars(stmt.limit(self.limit)))

    def results_not_posted(self, *, settled_before: dt.datetime) -> list[str]:
        stmt = select(Run.id).where(
            Run.status.in_(FINISHED_RUN),
            Run.result_posted.is_(False),
            Run.updated_at <= settled_before,
        )
        # Oldest first: one whose post failed was put back (``forget_result_posted``).
        ordered = stmt.order_by(Run.updated_at, Run.id)
        return list(self.session.scalars(ordered.limit(self.limit)))

    def finished_runs(self, *, before: dt.datetime) -> list[str]:
        """Finished runs with nothing open, last changed before ``before`` (all of them)."""
        stmt = select(Run.id).where(
            Run.status.in_(FINISHED_RUN),
            Run.updated_at <= before,
            Run.id.not_in(self._open_runs()),
        )
        return list(self.session.scalars(stmt))

    @staticmethod
    def _open_runs() -> Select[str]:
        return select(ApprovalRequest.run_id).where(ApprovalRequest.status.in_(OPEN_REQUEST))

    def without_card(
        self, *, created_before: dt.datetime, limit: int = 100
    ) -> list[tuple[str, str]]:
        """(request id, run id) of pending requests of unfinished runs whose card reference
        was never stored (requests reviewed in a digest have no card)."""
        stmt = (
            select(ApprovalRequest.id, ApprovalRequest.run_id)
            .join(Run, Run.id == ApprovalRequest.run_id)
            .where(
                ApprovalRequest.status == RequestStatus.PENDING,
                Run.status.in_(UNFINISHED_RUN),
                ApprovalRequest.card_ts.is_(None),
                ApprovalRequest.digest_channel.is_(None),  # listed in a digest, no card
                ApprovalRequest.created_at <= created_before,
            )
            .order_by(ApprovalRequest.created_at)
            .limit(limit)
        )
        return [(row[0], row[1]) for row in self.session.execute(stmt)]

    def due_for_expiry(self, now: dt.datetime, *, limit: int = 100) -> list[str]:
        """Pending requests of unfinished runs past their expiry, oldest deadline first."""
        return self._pending_where(ApprovalRequest.expires_at <= now, limit=limit)

    def due_for_reminder(self, now: dt.datetime, *, limit: int = 100) -> list[str]:
        """Pending requests of unfinished runs whose reminder time passed and that were never
        reminded."""
        return self._pending_where(
            ApprovalRequest.remind_at <= now, ApprovalRequest.reminded_at.is_(None), limit=limit
        )

    def _pending_where(self, *conditions: ColumnElement[bool], limit: int) -> list[str]:
        """Pending requests of runs still under way (one its run ended without closing is
        the reconciler's to close, not anyone's to review or be told of)."""
        stmt = (
            select(ApprovalRequest.id)
            .join(Run, Run.id == ApprovalRequest.run_id)
            .where(
                ApprovalRequest.status == RequestStatus.PENDING,
                Run.status.in_(UNFINISHED_RUN),
                *conditions,
            )
        )
        return list(self.session.scalars(stmt.order_by(ApprovalRequest.expires_at).limit(limit)))
