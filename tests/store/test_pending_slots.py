"""The open review slots behind "what waits on me": the fast listing gives what the exact
eligibility rules give, after every way a request or action changes, on both backends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from store import pending_slots
from store.claim_repository import ClaimRepository
from store.db import Database
from store.migrate import MIGRATIONS, upgrade
from store.models import Action, ApprovalRequest, PendingSlot, Run, new_id, utcnow
from store.pending_reads import pending_records
from store.repositories import ApprovalRepository, DecisionRepository
from tests.store.savepoints import UNDOINGS, undone

REL, REL2, SEC, ALICE = "U0REL1", "U0REL2", "U0SEC1", "U0ALICE"
RM, SECURITY, REQUESTER = "release-managers", "security", "requester"
# (reviewer, roles held, roles on their own requests): as the listing asks
READERS = [
    (REL, [RM], [REQUESTER]),
    (REL2, [RM], [REQUESTER]),
    (SEC, [SECURITY], [REQUESTER]),
    (ALICE, [], [REQUESTER]),
    (REL, [RM, SECURITY], [REQUESTER]),
]


def _action(position: int, roles: Sequence[str]) -> Action:
    return Action(
        id=new_id("act"),
        position=position,
        tool_name="publish_report",
        args={"path": "r.md"},
        description="",
        self_approval=False,
        risk="high",
        exempt=False,
        allowed_decisions=["approve", "edit", "reject"],
        approver_roles=list(roles),
        approvals_required=2,
        action_hash="h" * 64,
        operation_id=new_id("op"),
    )


def _request(
    db: Database, *roles: Sequence[str], requester: str = ALICE, minutes: int = 60
) -> ApprovalRequest:
    """A pending request with one action per role list, added through the repository."""
    now = utcnow()
    with db.transaction() as s:
        run = Run(id=new_id("run"), requester_id=requester, channel_id="C1", request_text="t")
        s.add(run)
        request = ApprovalRequest(
            id=new_id("apr"),
            run_id=run.id,
            interrupt_id=new_id("i"),
            kind="hitl_batch",
            policy_version="v1",
            requester_id=requester,
            expires_at=now + dt.timedelta(minutes=minutes),
        )
        ApprovalRepository(s).add(request, [_action(i, r) for i, r in enumerate(roles)])
        assert len(request.actions) == len(roles)  # loaded, for the test to read afterwards
        return request


def _exact(db: Database, reviewer: str, roles: list[str], own: list[str]) -> list[str]:
    """The rules spelled out over every request: what the fast path must agree with."""
    found = []
    with db.transaction() as s:
        for r in s.scalars(select(ApprovalRequest)):
            if r.status != "pending":
                continue
            for a in r.actions:
                approvers = {
                    d.reviewer_id
                    for d in a.decisions
                    if d.type in ("approve", "edit") and d.action_hash == a.bound_hash
                }
                held = own if reviewer == r.requester_id else roles
                open_ = a.outcome is None and reviewer not in approvers
                if open_ and set(held) & set(a.approver_roles):
                    found.append((r.created_at, r.id))  # oldest first
                    break
    return [rid for _, rid in sorted(found)]


def _fast(db: Database, reviewer: str, roles: list[str], own: list[str], limit: int = 100):
    with db.transaction() as s:
        got = pending_records(s, reviewer=reviewer, roles=roles, own_roles=own, limit=limit)
        return [r.id for r in got]


def _fast_in(s: Session, reviewer: str, roles: list[str]) -> list[str]:
    return [r.id for r in pending_records(s, reviewer=reviewer, roles=roles, limit=9)]


def _agree(db: Database) -> None:
    for reviewer, roles, own in READERS:
        exact = _exact(db, reviewer, roles, own)
        assert _fast(db, reviewer, roles, own) == exact, (reviewer, roles)
        assert _fast(db, reviewer, roles, own, limit=2) == exact[:2], (reviewer, roles)


def _approve(db: Database, action_id: str, reviewer: str, *, outcome: str | None = None) -> None:
    with db.transaction() as s:
        action = s.get(Action, action_id)
        assert action is not None
        DecisionRepository(s).add(
            action, reviewer_id=reviewer, team_id=None, type_="approve", message=None
        )
        action.outcome = outcome


def test_fast_listing_agrees_with_the_exact_rules_through_every_change(store_url: str) -> None:
    db = Database(store_url)
    upgrade(db.engine)
    plain = _request(db, [RM], minutes=50)
    both = _request(db, [SECURITY, RM], minutes=40)
    question = _request(db, [REQUESTER], minutes=30)
    own = _request(db, [RM], requester=REL, minutes=20)
    pair = _request(db, [RM], [SECURITY], minutes=10)
    later = _request(db, [RM], minutes=90)
    _agree(db)
    assert _fast(db, REL, [RM], [REQUESTER]) == [plain.id, both.id, pair.id, later.id]

    _approve(db, plain.actions[0].id, REL)  # one of two approvals: REL is done, REL2 is not
    _agree(db)
    assert plain.id not in _fast(db, REL, [RM], [REQUESTER])
    assert plain.id in _fast(db, REL2, [RM], [REQUESTER])
    with db.transaction() as s:  # an edit: REL's approval was of the old version
        action = s.get(Action, plain.actions[0].id)
        assert action is not None
        action.current_hash = "e" * 64
    _agree(db)
    assert plain.id in _fast(db, REL, [RM], [REQUESTER])

    _approve(db, pair.actions[1].id, SEC, outcome="approved")  # decided: SEC has nothing left
    _agree(db)
    assert pair.id not in _fast(db, SEC, [SECURITY], [REQUESTER])
    assert pair.id in _fast(db, REL, [RM], [REQUESTER])

    with db.transaction() as s:  # a click completes it: claimed for resuming
        assert ClaimRepository(s).claim(both.id, owner="o", lease=dt.timedelta(minutes=1))
    with db.transaction() as s:  # the sweeper's way: outcomes, then the status
        request = ApprovalRepository(s).get(later.id, for_update=True)
        assert request is not None
        request.actions[0].outcome = "expired"
        request.status = "resuming"
    with db.transaction() as s:
        request = ApprovalRepository(s).get(question.id, for_update=True)
        assert request is not None
        ApprovalRepository(s).finish(request, status="invalidated", outcome="gone")
    _agree(db)
    assert _fast(db, REL, [RM], [REQUESTER]) == [plain.id, pair.id]
    assert _fast(db, ALICE, [], [REQUESTER]) == []
    assert _fast(db, REL, [RM], [REQUESTER]) == _fast(db, REL, [RM], [])
    assert own.id not in _fast(db, REL, [RM, SECURITY], [REQUESTER])
    with db.transaction() as s:
        assert {r.request_id for r in s.scalars(select(PendingSlot))} == {own.id, pair.id, plain.id}
    db.dispose()


def test_the_slots_move_with_their_transaction(store_url: str) -> None:
    """A claim or outcome rolled back leaves the request listed; one committed removes it."""
    db = Database(store_url)
    upgrade(db.engine)
    request = _request(db, [RM])
    with pytest.raises(RuntimeError), db.transaction() as s:
        assert ClaimRepository(s).claim(request.id, owner="o", lease=dt.timedelta(minutes=1))
        s.get(Action, request.actions[0].id).outcome = "rejected"  # type: ignore[union-attr]
        s.flush()
        assert _fast_in(s, REL, [RM]) == []
        raise RuntimeError("the transaction fails")
    assert _fast(db, REL, [RM], []) == [request.id]
    with db.transaction() as s:
        s.get(Action, request.actions[0].id).outcome = "rejected"  # type: ignore[union-attr]
    assert _fast(db, REL, [RM], []) == []
    with db.transaction() as s:  # an action added later to the open request opens it again
        late = _action(1, [SECURITY])
        late.request_id = request.id
        s.add(late)
    assert _fast(db, SEC, [SECURITY], []) == [request.id]
    db.dispose()


def test_the_upgrade_fills_the_slots_from_existing_requests(store_url: str) -> None:
    db = Database(store_url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    now = utcnow()
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0007")
        for i, (status, outcome, roles) in enumerate(
            [
                ("pending", None, [RM, SECURITY]),
                ("pending", None, [REQUESTER, REQUESTER]),
                ("pending", "approved", [RM]),
                ("resolved", None, [RM]),
                ("expired", None, [SECURITY]),
            ]
        ):
            conn.execute(
                Run.__table__.insert().values(
                    id=f"run{i}",
                    requester_id=ALICE,
                    channel_id="C1",
                    request_text="t",
                    status="waiting",
                    result_posted=False,
                    created_at=now,
                    updated_at=now,
                )
            )
            conn.execute(
                ApprovalRequest.__table__.insert().values(
                    id=f"apr{i}",
                    run_id=f"run{i}",
                    interrupt_id="i",
                    kind="hitl_batch",
                    status=status,
                    policy_version="v1",
                    requester_id=ALICE,
                    expires_at=now + dt.timedelta(minutes=i),
                    created_at=now,
                )
            )
            row = {c: getattr(_action(0, roles), c) for c in _ACTION_COLUMNS}
            conn.execute(
                Action.__table__.insert().values(
                    **row, id=f"act{i}", request_id=f"apr{i}", outcome=outcome
                )
            )
    upgrade(db.engine)
    with db.transaction() as s:
        slots = {(p.action_id, p.role, p.request_id) for p in s.scalars(select(PendingSlot))}
        assert slots == {
            ("act0", RM, "apr0"),
            ("act0", SECURITY, "apr0"),
            ("act1", REQUESTER, "apr1"),
        }
        assert s.get(PendingSlot, ("act1", REQUESTER)).expires_at == now + dt.timedelta(  # type: ignore[union-attr]
            minutes=1
        )
        assert pending_slots.rebuild(s) == 3  # what the store itself would have written
        rebuilt = {(p.action_id, p.role, p.request_id) for p in s.scalars(select(PendingSlot))}
        assert rebuilt == slots
    assert _fast(db, REL, [RM], [REQUESTER]) == ["apr0"]
    assert _fast(db, ALICE, [], [REQUESTER]) == ["apr1"]
    db.dispose()


_ACTION_COLUMNS = (
    "position",
    "tool_name",
    "args",
    "description",
    "allowed_decisions",
    "approver_roles",
    "approvals_required",
    "self_approval",
    "risk",
    "action_hash",
    "operation_id",
    "exempt",
)


def test_a_transaction_rewrites_the_slots_it_touched_once_when_it_commits(
    store_url: str,
) -> None:
    """A transaction that changes an action and its request in several flushes: the slots
    are rewritten once, at commit, from what the transaction leaves."""
    db = Database(store_url)
    upgrade(db.engine)
    first, second = _request(db, [RM]), _request(db, [RM], minutes=30)
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    with db.transaction() as s:
        action = s.get(Action, first.actions[0].id)
        assert action is not None
        action.outcome = "approved"
        s.flush()
        request = s.get(ApprovalRequest, second.id)
        assert request is not None
        request.expires_at = utcnow() + dt.timedelta(minutes=5)
        s.flush()
        assert not [q for q in sent if "pending_slots" in q]  # nothing rewritten yet
    assert sum(q.startswith("DELETE FROM pending_slots") for q in sent) == 1
    _agree(db)
    assert _fast(db, REL, [RM], [REQUESTER]) == [second.id]
    db.dispose()


def test_a_request_that_neither_was_nor_is_pending_rewrites_no_slots(store_url: str) -> None:
    """Resuming -> resolved (a resume's end) has no slots to rewrite; pending -> anything
    else still drops the request's slots."""
    db = Database(store_url)
    upgrade(db.engine)
    resumed, expired = _request(db, [RM]), _request(db, [RM])
    with db.transaction() as s:
        assert ClaimRepository(s).claim(resumed.id, owner="me", lease=dt.timedelta(minutes=1))
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    with db.transaction() as s:
        request = ApprovalRepository(s).get(resumed.id, for_update=True)
        assert request is not None
        ApprovalRepository(s).finish(request, status="resolved", outcome="done")
    assert not [q for q in sent if "pending_slots" in q]
    with db.transaction() as s:
        request = ApprovalRepository(s).get(expired.id, for_update=True)
        assert request is not None
        ApprovalRepository(s).finish(request, status="expired", outcome="expired")
    assert [q for q in sent if q.startswith("DELETE FROM pending_slots")]
    _agree(db)
    assert _fast(db, REL, [RM], [REQUESTER]) == []
    db.dispose()


def test_a_request_claimed_in_the_transaction_is_not_rewritten_again_at_commit(
    store_url: str,
) -> None:
    """The last decision changes an action and claims its request in one transaction: the
    claim drops the request's slots, and nothing of it is written or read again at commit.
    A request the same transaction leaves pending is still rewritten."""
    db = Database(store_url)
    upgrade(db.engine)
    claimed, other = _request(db, [RM]), _request(db, [RM], [SECURITY])
    sent: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    with db.transaction() as s:
        request = ApprovalRepository(s).get(claimed.id, for_update=True)
        assert request is not None
        request.actions[0].outcome = "approved"
        s.flush()
        assert ClaimRepository(s).claim(
            claimed.id, owner="me", lease=dt.timedelta(minutes=1), loaded=request
        )
    assert sum("pending_slots" in q for q in sent) == 1, [q for q in sent if "slots" in q]
    assert not [q for q in sent if q.startswith("SELECT actions.id, actions.request_id")]
    sent.clear()
    with db.transaction() as s:
        request = ApprovalRepository(s).get(other.id, for_update=True)
        assert request is not None
        request.actions[0].outcome = "approved"
    assert [q for q in sent if q.startswith("SELECT actions.id, actions.request_id")]
    _agree(db)
    assert _fast(db, SEC, [SECURITY], [REQUESTER]) == [other.id]
    assert _fast(db, REL, [RM], [REQUESTER]) == []
    db.dispose()


@pytest.mark.parametrize("how", UNDOINGS)
def test_a_claim_undone_with_its_savepoint_leaves_the_rewrite_to_the_commit(
    store_url: str, how: str
):
    """The savepoint that claimed the request was undone, however SQLAlchemy says so: the
    request is pending again, and what the transaction changed in it before is written to its
    slots at commit."""
    db = Database(store_url)
    upgrade(db.engine)
    both = _request(db, [RM], [SECURITY])
    with db.transaction() as s:
        request = ApprovalRepository(s).get(both.id, for_update=True)
        assert request is not None
        request.actions[0].outcome = "approved"  # the release managers' part is decided
        s.flush()

        def claim() -> None:
            assert ClaimRepository(s).claim(both.id, owner="me", lease=dt.timedelta(minutes=1))

        undone(s, how, claim)
    _agree(db)
    assert _fast(db, REL, [RM], [REQUESTER]) == []
    assert _fast(db, SEC, [SECURITY], [REQUESTER]) == [both.id]
    db.dispose()


def test_an_outcome_written_as_a_core_statement_moves_the_slots_at_commit(
    store_url: str,
) -> None:
    """A decision writes its action's outcome past the ORM, which the flush hook never sees:
    the action is noted all the same, and leaves the list when the transaction commits (not
    before: a rolled-back one leaves it listed)."""
    db = Database(store_url)
    upgrade(db.engine)
    request = _request(db, [RM])
    with pytest.raises(RuntimeError), db.transaction() as s:
        action = s.get(Action, request.actions[0].id)
        assert action is not None
        ApprovalRepository(s).decide_action(action, outcome="rejected")
        raise RuntimeError("the transaction fails")
    assert _fast(db, REL, [RM], []) == [request.id]
    with db.transaction() as s:
        action = s.get(Action, request.actions[0].id)
        assert action is not None
        ApprovalRepository(s).decide_action(action, outcome="rejected")
        assert action.outcome == "rejected" and not s.dirty, "nothing left for the ORM"
    assert _fast(db, REL, [RM], []) == []
    db.dispose()
