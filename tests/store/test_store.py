"""The store on both databases: migrations, round trips, and the one-winner claim."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, inspect, select, text

from store.audit_models import AuditEvent
from store.claim_repository import ClaimRepository
from store.db import Database
from store.engines import DatabaseUrlError, sqlalchemy_url
from store.migrate import current_revision, head_revision, upgrade
from store.models import Action, ApprovalRequest, Decision, Run, new_id, utcnow
from store.repositories import (
    ApprovalRepository,
    AuditRepository,
    DecisionRepository,
    RunRepository,
)

TABLES = {"runs", "approval_requests", "actions", "decisions", "audit_events", "alembic_version"}
AUDIT_KEY = b"an AUDIT_KEY for the store tests, 32+"


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):  # type: ignore[no-untyped-def]
    url = (
        f"sqlite:///{tmp_path / 's.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    database = Database(url, audit_key=AUDIT_KEY)
    upgrade(database.engine, audit_key=AUDIT_KEY)
    yield database
    database.dispose()


def seed(db: Database) -> str:
    now = utcnow()
    with db.transaction() as s:
        run = RunRepository(s).add(
            Run(
                id=new_id("run"),
                requester_id="U1",
                channel_id="C1",
                request_text="x",
                status="waiting",
                created_at=now,
                updated_at=now,
            )
        )
        request = ApprovalRequest(
            id=new_id("apr"),
            run_id=run.id,
            interrupt_id="i1",
            kind="hitl_batch",
            status="pending",
            policy_version="v1",
            requester_id="U1",
            expires_at=now + dt.timedelta(hours=1),
            created_at=now,
        )
        action = Action(
            id=new_id("act"),
            position=0,
            tool_name="t",
            args={"k": "ü"},
            description="",
            allowed_decisions=["approve"],
            approver_roles=["r"],
            approvals_required=1,
            self_approval=False,
            risk="high",
            action_hash="h" * 64,
            operation_id="op_1",
        )
        ApprovalRepository(s).add(request, [action])
        return request.id


def test_upgrade_creates_every_table_and_is_idempotent(db):
    assert set(inspect(db.engine).get_table_names()) >= TABLES
    assert upgrade(db.engine) == head_revision() == current_revision(db.engine)


def test_round_trip_keeps_json_and_aware_datetimes(db):
    request_id = seed(db)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request.actions[0].args == {"k": "ü"}
        assert request.expires_at.tzinfo is not None
        assert request.expires_at > utcnow()


def test_exactly_one_claim_wins_under_concurrency(db):
    request_id = seed(db)
    barrier = threading.Barrier(8)

    def claim(i: int) -> bool:
        barrier.wait()
        with db.transaction() as s:
            return ClaimRepository(s).claim(
                request_id, owner=f"w{i}", lease=dt.timedelta(minutes=1)
            )

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(claim, range(8)))
    assert results.count(True) == 1
    with db.transaction() as s:
        assert ApprovalRepository(s).get(request_id).status == "resuming"


def test_audit_events_keep_order(db):
    with db.transaction() as s:
        for kind in ("a", "b", "c"):
            AuditRepository(s).record(kind, detail={"k": kind})
    with db.transaction() as s:
        assert [e.kind for e in AuditRepository(s).iter_all()] == ["a", "b", "c"]


@pytest.mark.parametrize("url", ["mysql://x/y", "nonsense", "http://example.com"])
def test_unsupported_urls_are_refused(url):
    with pytest.raises(DatabaseUrlError):
        sqlalchemy_url(url)


def test_supported_urls_get_their_driver():
    assert sqlalchemy_url("sqlite:///a.db") == "sqlite+pysqlite:///a.db"
    assert sqlalchemy_url("postgresql://u@h/d").startswith("postgresql+psycopg://")


def _tampering(table: str, *, sqlite: bool) -> dict[str, str]:
    """Every way to change or remove a stored row with plain SQL on this backend."""
    column = "kind" if table == "audit_events" else "type"
    statements = {
        "UPDATE": f"UPDATE {table} SET {column} = 'forged'",
        "DELETE": f"DELETE FROM {table}",
    }
    if sqlite:  # REPLACE deletes the old row without firing delete triggers
        statements["REPLACE"] = f"INSERT OR REPLACE INTO {table} SELECT * FROM {table}"
    else:
        statements["TRUNCATE"] = f"TRUNCATE {table}"
    return statements


def test_decisions_and_audit_events_are_append_only(db):
    request_id = seed(db)
    with db.transaction() as s:
        action = ApprovalRepository(s).get(request_id).actions[0]
        DecisionRepository(s).add(
            action, reviewer_id="U2", team_id=None, type_="approve", message=None
        )
        AuditRepository(s).record("x")
    unprotected = []
    for table in ("audit_events", "decisions"):
        for verb, statement in _tampering(table, sqlite=db.is_sqlite).items():
            try:
                with db.transaction() as s:
                    s.execute(text(statement))
            except Exception as exc:
                assert "append-only" in str(exc), (table, verb, exc)
            else:
                unprotected.append(f"{table}: {verb}")
    assert unprotected == []
    with db.transaction() as s:
        assert s.scalar(select(Decision.type)) == "approve"
        assert s.scalar(select(func.count()).select_from(AuditEvent)) == 1
        assert AuditRepository(s).verify().intact


def test_concurrent_audit_appends_keep_one_unbroken_chain(db):
    barrier = threading.Barrier(8)

    def append(i: int) -> None:
        barrier.wait()
        for n in range(5):
            with db.transaction() as s:
                AuditRepository(s).record("event", detail={"writer": i, "n": n})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(append, range(8)))
    with db.transaction() as s:
        report = AuditRepository(s).verify()
    assert report.intact and report.checked == 40


def test_a_locked_read_sees_what_was_committed_while_it_waited(pg_url):
    """Objects read before the row lock must not keep their old values after it (SQLAlchemy's
    identity map). PostgreSQL only: on SQLite a writer holds the whole database from BEGIN."""
    db = Database(pg_url)
    upgrade(db.engine)
    request_id = seed(db)
    with db.transaction() as waiting:
        action_id = ApprovalRepository(waiting).get(request_id).actions[0].id
        early = ApprovalRepository(waiting).get_action(action_id)
        assert early.outcome is None
        with db.transaction() as other:  # another reviewer decides meanwhile
            ApprovalRepository(other).get_action(action_id).outcome = "approved"
        locked = ApprovalRepository(waiting).get(request_id, for_update=True)
        assert locked.actions[0].outcome == "approved"
    db.dispose()


def test_a_failed_statement_does_not_carry_its_values_into_logs(db):
    """What a statement writes may be anything a reviewer typed or an argument a policy
    redacts: an error (logged with its message) names the statement, never the values."""
    from sqlalchemy.exc import IntegrityError

    secret = "sk-live-do-not-log-4242"
    insert = text(
        "INSERT INTO runs (id, requester_id, channel_id, request_text, status, result_posted, "
        "created_at, updated_at) VALUES (:id, 'U1', 'C1', :secret, 'running', false, :at, :at)"
    )
    values = {"id": new_id("run"), "secret": secret, "at": utcnow()}
    with db.transaction() as s:
        s.execute(insert, values)
    with pytest.raises(IntegrityError) as caught, db.transaction() as s:
        s.execute(insert, values)  # the same id again
    assert "INSERT INTO runs" in str(caught.value)
    assert secret not in str(caught.value)
