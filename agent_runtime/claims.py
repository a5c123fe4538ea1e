"""Who resumes a request: one claim per request, held under a lease that its owner renews while
it works and that another process takes over when the owner dies. And a run at work: its row
touched while its agent works, so that no other process takes it for stalled."""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

from agent_runtime.renewals import Renewals
from store.claim_repository import ClaimRepository, ClaimTerms
from store.db import Database
from store.maintenance import MaintenanceQueries
from store.models import ApprovalRequest
from store.repositories import AuditRepository, RunRepository
from store.statuses import RequestStatus

logger = logging.getLogger(__name__)


def process_owner() -> str:
    """This process's name on its claims: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Claims:
    def __init__(
        self,
        *,
        db: Database,
        clock: Callable[[], dt.datetime],
        lease: dt.timedelta,
        owner: str | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.lease = lease
        self.owner = owner or process_owner()
        self._renewals = Renewals(every=lease.total_seconds() / 3, name="claim-leases")

    def claim(self, session: Session, request_id: str) -> bool:
        """pending -> resuming, in the caller's transaction; true for exactly one caller."""
        return ClaimRepository(session).claim(request_id, owner=self.owner, lease=self.lease)

    def terms(self, request_id: str) -> ClaimTerms:
        """This process's claim of a request, to be written with more (``write_decision``)."""
        return ClaimTerms.of(request_id, owner=self.owner, lease=self.lease)

    def held(self, request: ApprovalRequest) -> bool:
        """Whether this process holds the request's claim (and may resume it)."""
        return request.status == RequestStatus.RESUMING and request.claimed_by == self.owner

    def take_over_stale(self) -> Iterator[str]:
        """Claims of dead owners, each yielded as soon as this process took it (one taker
        wins each; audited), for the caller to resume before the next is taken."""
        now = self.clock()
        with self.db.transaction() as s:
            stale = MaintenanceQueries(s).stale_claims(now)
        for request_id in stale:
            with self.db.transaction() as s:
                won = ClaimRepository(s).take_over(
                    request_id, owner=self.owner, now=now, lease=self.lease
                )
                if won:
                    AuditRepository(s).record(
                        "resume_taken_over", request_id=request_id, detail={"owner": self.owner}
                    )
            if won:
                yield request_id

    def settled_before(self) -> dt.datetime:
        """Work last touched before this is not in progress anywhere (a lease has passed)."""
        return self.clock() - self.lease

    def working(self, run_id: str) -> AbstractContextManager[None]:
        """Keep the run's row touched while its agent works under the run's lock, until it
        ends: maintenance takes a run for stalled a lease after its last change, and the lock
        alone cannot tell it apart from a live one once the lock is lost (on PostgreSQL, its
        connection dropped while the agent went on: the server frees it). Like ``kept``, the
        body does not run if no thread can keep the time (a run not started is ended by
        maintenance, told)."""

        def renew() -> bool:
            with self.db.single() as s:
                return RunRepository(s).touch(run_id, at=self.clock())

        return self._renewals.kept(run_id, renew, lost=_ended)

    def kept(self, request_id: str) -> AbstractContextManager[None]:
        """Renew the claim while the body runs, so a slow resume is not taken over."""

        def renew() -> bool:
            with self.db.transaction() as s:
                return ClaimRepository(s).renew_claim(
                    request_id, owner=self.owner, until=self.clock() + self.lease
                )

        def lost() -> None:
            logger.warning("the claim of %s was taken over while it was resumed", request_id)

        return self._renewals.kept(request_id, renew, lost=lost)


def _ended() -> None:
    """A run that ended needs no more touches (its renewals stop)."""
