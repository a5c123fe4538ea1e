"""Who resumes an approval request: its claim (pending -> resuming) and the claim's lease,
renewed by its owner and taken over once it runs out. One winner each, whatever the
concurrency."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import CTE, Select, bindparam, func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from store import pending_slots
from store.db import affected
from store.models import ApprovalRequest, Run, utcnow
from store.statuses import RequestStatus

_CLAIM = (
    update(ApprovalRequest)
    .where(
        ApprovalRequest.id == bindparam("claimed_request"),
        ApprovalRequest.status == RequestStatus.PENDING,
    )
    .values(
        status=RequestStatus.RESUMING,
        claimed_by=bindparam("claim_owner"),
        claim_expires_at=bindparam("claim_until"),
    )
)
_CLAIMED = _CLAIM.returning(ApprovalRequest.id).cte("claimed")


def claiming(*writes: CTE) -> Select[int]:
    """PostgreSQL: the claim, the removal of the request's review slots, and ``writes`` (other
    data-modifying CTEs, e.g. the decision that completes the request), in one statement,
    which returns 1 if the claim was won, 0 if not. Its parameters: ``ClaimTerms.values``."""
    stmt = select(func.count()).select_from(_CLAIMED)
    for write in writes:
        stmt = stmt.add_cte(write)
    return stmt.add_cte(pending_slots.dropping_slots(_CLAIMED))


_CLAIM_CLOSING_SLOTS = claiming()


@dataclass(frozen=True)
class ClaimTerms:
    """A claim to write: the request moves pending -> resuming, held by ``owner`` until
    ``until``."""

    request_id: str
    owner: str
    until: dt.datetime

    @classmethod
    def of(cls, request_id: str, *, owner: str, lease: dt.timedelta) -> ClaimTerms:
        return cls(request_id, owner, utcnow() + lease)

    def values(self) -> dict[str, object]:
        return {
            "claimed_request": self.request_id,
            "claim_owner": self.owner,
            "claim_until": self.until,
        }


class ClaimRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def claim_state(self, request_id: str) -> tuple[str, str | None, str] | None:
        """(status, claim owner, run status) of a request, in one short read."""
        stmt = (
            select(ApprovalRequest.status, ApprovalRequest.claimed_by, Run.status)
            .join(Run, Run.id == ApprovalRequest.run_id)
            .where(ApprovalRequest.id == request_id)
        )
        row = self.session.execute(stmt).first()
        return (row[0], row[1], row[2]) if row is not None else None

    def claim(
        self,
        request_id: str,
        *,
        owner: str,
        lease: dt.timedelta,
        loaded: ApprovalRequest | None = None,
    ) -> bool:
        """Move pending -> resuming; True for exactly one caller, whatever the concurrency.
        ``loaded``: the caller's copy of the request, made to say what the row now says
        (without writing the row a second time)."""
        return self.claim_on(ClaimTerms.of(request_id, owner=owner, lease=lease), loaded=loaded)

    def claim_on(self, terms: ClaimTerms, *, loaded: ApprovalRequest | None = None) -> bool:
        """``claim``, on terms made before."""
        # Core statements on the transaction's connection: nothing pending in the session bears
        # on them, so they flush nothing, and they skip the ORM's cost on the click's path.
        conn = self.session.connection()
        if conn.dialect.name == "postgresql":
            if not conn.execute(_CLAIM_CLOSING_SLOTS, terms.values()).scalar():
                return False
            self.claimed(terms, loaded=loaded)
            return True
        if affected(conn.execute(_CLAIM, terms.values())) == 0:
            return False
        pending_slots.close_request(self.session, terms.request_id)
        _show(terms, loaded)
        return True

    def claimed(self, terms: ClaimTerms, *, loaded: ApprovalRequest | None) -> None:
        """A claim won by a statement that also dropped the request's slots (``claiming``):
        the commit rewrites none of them; ``loaded`` is made to say what the row now says."""
        pending_slots.closed_with(self.session, terms.request_id)
        _show(terms, loaded)

    def renew_claim(self, request_id: str, *, owner: str, until: dt.datetime) -> bool:
        result = self.session.execute(
            update(ApprovalRequest)
            .where(
                ApprovalRequest.id == request_id,
                ApprovalRequest.status == RequestStatus.RESUMING,
                ApprovalRequest.claimed_by == owner,
            )
            .values(claim_expires_at=until)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def take_over(
        self, request_id: str, *, owner: str, now: dt.datetime, lease: dt.timedelta
    ) -> bool:
        """Claim a request whose owner's lease ran out (it died); one taker wins."""
        result = self.session.execute(
            update(ApprovalRequest)
            .where(
                ApprovalRequest.id == request_id,
                ApprovalRequest.status == RequestStatus.RESUMING,
                ApprovalRequest.claim_expires_at <= now,
            )
            .values(claimed_by=owner, claim_expires_at=now + lease)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0


def _show(terms: ClaimTerms, loaded: ApprovalRequest | None) -> None:
    """The caller's copy of the request says what its row now says (not written again)."""
    if loaded is not None:
        set_committed_value(loaded, "status", RequestStatus.RESUMING)
        set_committed_value(loaded, "claimed_by", terms.owner)
        set_committed_value(loaded, "claim_expires_at", terms.until)
