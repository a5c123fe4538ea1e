"""The decision that completes its request, written with the request's claim: on PostgreSQL
in one statement, and as the two separate writes would leave it, whether the claim is won
or not."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import event, select

from store.claim_repository import ClaimRepository, ClaimTerms
from store.db import Database
from store.decision_repository import DecisionFields
from store.migrate import upgrade
from store.models import Action, ApprovalRequest, PendingSlot
from store.repositories import ApprovalRepository, DecisionRepository
from store.statuses import ActionOutcome, RequestStatus
from tests.agent_runtime.rows import seed_request

LEASE = dt.timedelta(minutes=5)


def _decide_and_claim(db: Database, action_id: str, *, owner: str) -> tuple[bool, list[str]]:
    sent: list[str] = []
    listen = event.listens_for(db.engine, "before_cursor_execute")
    listen(lambda *a: sent.append(a[2]))
    with db.transaction() as s:
        action = s.get(Action, action_id)
        assert action is not None
        request = ApprovalRepository(s).get(action.request_id, for_update=True)
        assert request is not None
        sent.clear()
        won = DecisionRepository(s).add_claiming(
            action,
            fields=DecisionFields(
                reviewer_id="U0REL1", team_id="T1", type_="approve", message=None, attempt_key=None
            ),
            outcome=ActionOutcome.APPROVED,
            claim=ClaimTerms.of(request.id, owner=owner, lease=LEASE),
            loaded=request,
        )
        seen = (str(request.status), request.claimed_by, [str(a.outcome) for a in request.actions])
    return won, [*sent, repr(seen)]


def test_a_completing_decision_is_written_with_its_claim(store_url: str) -> None:
    db = Database(store_url)
    upgrade(db.engine)
    seeded = seed_request(db)
    won, sent = _decide_and_claim(db, seeded.action_id, owner="me")
    assert won
    writes = sent[:-1]
    if db.engine.dialect.name == "postgresql":
        assert len(writes) == 1, writes
        assert "INSERT INTO decisions" in writes[0] and "UPDATE approval_requests" in writes[0]
    # the caller's copy says what the rows say
    assert sent[-1] == repr(("resuming", "me", ["approved"]))
    with db.transaction() as s:
        request = s.get(ApprovalRequest, seeded.request_id)
        assert request is not None
        assert (request.status, request.claimed_by) == (RequestStatus.RESUMING, "me")
        assert [(a.outcome, len(a.decisions)) for a in request.actions] == [("approved", 1)]
        slots = s.scalars(select(PendingSlot).where(PendingSlot.request_id == request.id))
        assert list(slots) == [], "a claimed request waits for nobody"
    db.dispose()


@pytest.mark.parametrize("claimed_first", [True, False], ids=["claimed", "closed"])
def test_a_decision_whose_claim_is_lost_is_written_all_the_same(
    store_url: str, claimed_first: bool
) -> None:
    """Another owner claimed it, or it closed, before: the decision stands, the claim is not
    taken, and nothing of it reaches the caller's copy."""
    db = Database(store_url)
    upgrade(db.engine)
    seeded = seed_request(db)
    with db.transaction() as s:
        if claimed_first:
            assert ClaimRepository(s).claim(seeded.request_id, owner="other", lease=LEASE)
        else:
            request = s.get(ApprovalRequest, seeded.request_id)
            assert request is not None
            request.status = RequestStatus.EXPIRED
    won, sent = _decide_and_claim(db, seeded.action_id, owner="me")
    assert not won
    before = ("resuming", "other") if claimed_first else ("expired", None)
    assert sent[-1] == repr((*before, ["approved"]))
    with db.transaction() as s:
        request = s.get(ApprovalRequest, seeded.request_id)
        assert request is not None
        assert (request.status, request.claimed_by) == before
        assert [(a.outcome, len(a.decisions)) for a in request.actions] == [("approved", 1)]
    db.dispose()
