"""A store on SQLite with one waiting run and one pending request, for testing one owner at a
time with fakes around it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from store.db import Database
from store.migrate import upgrade
from store.models import Action, ApprovalRequest, Run, new_id, utcnow
from store.repositories import ApprovalRepository, RunRepository
from store.statuses import RequestStatus, RunStatus
from tests.migrated import migrated_sqlite_url


@dataclass(frozen=True)
class Seeded:
    run_id: str
    request_id: str
    action_id: str


def sqlite_store(tmp_path: Path) -> Database:
    db = Database(migrated_sqlite_url(tmp_path / "owners.db"))
    upgrade(db.engine)  # at the newest revision already: changes nothing
    return db


def seed_request(db: Database, *, created_at: dt.datetime | None = None) -> Seeded:
    now = created_at or utcnow()
    with db.transaction() as s:
        run = RunRepository(s).add(
            Run(
                id=new_id("run"),
                requester_id="U0ALICE",
                channel_id="C1",
                thread_ts="1.0",
                request_text="send it",
                status=RunStatus.WAITING,
                created_at=now,
                updated_at=now,
            )
        )
        request = ApprovalRequest(
            id=new_id("apr"),
            run_id=run.id,
            interrupt_id="i1",
            kind="hitl_batch",
            status=RequestStatus.PENDING,
            policy_version="v1",
            requester_id="U0ALICE",
            expires_at=now + dt.timedelta(hours=1),
            created_at=now,
        )
        action = Action(
            id=new_id("act"),
            position=0,
            tool_name="send_external_message",
            args={"recipient": "a@example.com"},
            description="",
            allowed_decisions=["approve", "reject"],
            approver_roles=["release-managers"],
            approvals_required=1,
            self_approval=False,
            risk="high",
            action_hash="h" * 64,
            operation_id="op_1",
        )
        ApprovalRepository(s).add(request, [action])
        return Seeded(run.id, request.id, action.id)
