"""Claims: one owner per request, a lease that a live owner keeps and a dead one loses."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from agent_runtime.claims import Claims
from store.audit_models import AuditEvent
from store.models import ApprovalRequest, utcnow
from store.statuses import RequestStatus
from tests.agent_runtime.rows import seed_request, sqlite_store

LEASE = dt.timedelta(minutes=1)


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


def test_one_claim_per_request_and_only_its_owner_holds_it(tmp_path):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    first = Claims(db=db, clock=utcnow, lease=LEASE, owner="one")
    second = Claims(db=db, clock=utcnow, lease=LEASE, owner="two")
    with db.transaction() as s:
        assert first.claim(s, seeded.request_id)
    with db.transaction() as s:
        assert not second.claim(s, seeded.request_id), "a request is claimed once"
        request = s.get(ApprovalRequest, seeded.request_id)
        assert request is not None and request.status == RequestStatus.RESUMING
        assert first.held(request) and not second.held(request)


def test_a_claim_is_taken_over_only_after_its_lease_ran_out(tmp_path):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    clock = Clock()
    dead = Claims(db=db, clock=clock, lease=LEASE, owner="dead")
    survivor = Claims(db=db, clock=clock, lease=LEASE, owner="survivor")
    with db.transaction() as s:
        assert dead.claim(s, seeded.request_id)
    assert list(survivor.take_over_stale()) == [], "a live lease is not taken over"
    clock.now += LEASE + dt.timedelta(seconds=1)
    assert list(survivor.take_over_stale()) == [seeded.request_id]
    assert list(dead.take_over_stale()) == [], "one taker wins"
    with db.transaction() as s:
        request = s.get(ApprovalRequest, seeded.request_id)
        assert request is not None and survivor.held(request) and not dead.held(request)
        kinds = s.scalars(select(AuditEvent.kind)).all()
    assert kinds.count("resume_taken_over") == 1


def test_settled_work_is_older_than_one_lease(tmp_path):
    clock = Clock()
    claims = Claims(db=sqlite_store(tmp_path), clock=clock, lease=LEASE, owner="x")
    assert claims.settled_before() == clock.now - LEASE
