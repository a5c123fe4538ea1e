"""Expiry and reminders with an injected clock; on PostgreSQL with two replicas sweeping at once."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.sweeper import SweepResult
from store.audit_models import AuditEvent
from store.models import ApprovalRequest, utcnow
from store.repositories import RunRepository
from store.statuses import RunStatus
from tests.agent_runtime.engine_env import make_env, paused_run


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


def test_nothing_happens_before_time(tmp_path):
    clock = Clock()
    env = make_env(tmp_path, clock=clock)
    paused_run(env)
    assert env.engine.sweep().expired == 0
    clock.now += dt.timedelta(minutes=59)  # the bundled policy: remind after 1h, expire after 4h
    assert env.engine.sweep() == SweepResult(expired=0, reminded=0)
    assert env.notes.reminded == [] and env.notes.expired == []


def test_reminder_names_eligible_reviewers_but_not_the_requester(tmp_path):
    clock = Clock()
    env = make_env(tmp_path, clock=clock)
    paused_run(env)
    clock.now += dt.timedelta(hours=1, seconds=1)
    assert env.engine.sweep().reminded == 1
    _view, reviewers, escalation = env.notes.reminded[0]
    assert set(reviewers.users) == {"U0REL1", "U0REL2", "U0SEC1"}
    assert reviewers.usergroups == ("S0RELMGR",)
    assert escalation is None


def test_two_replicas_expire_a_request_once(tmp_path, migrated_pg_url):
    clock = Clock()
    first = make_env(tmp_path / "a", url=migrated_pg_url, clock=clock)
    second = make_env(tmp_path / "b", url=migrated_pg_url, clock=clock)
    second.workspace = first.workspace
    paused_run(first)
    clock.now += dt.timedelta(hours=5)
    barrier = threading.Barrier(2)

    def sweep(env):  # type: ignore[no-untyped-def]
        barrier.wait()
        return env.engine.sweep().expired

    with ThreadPoolExecutor(2) as pool:
        counts = list(pool.map(sweep, [first, second]))
    assert sorted(counts) == [0, 1]
    with first.db.transaction() as s:
        assert s.scalars(select(ApprovalRequest.status)).one() == "expired"
        kinds = list(s.scalars(select(AuditEvent.kind)))
    assert kinds.count("expired") == 1 and kinds.count("resumed") == 1
    assert first.workspace.effects() == []
    assert len(first.notes.expired) + len(second.notes.expired) == 1
    for env in (first, second):
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_expiry_under_a_newer_policy_still_rejects_and_says_expired(tmp_path):
    """A rejection is safe under any policy: expiry is not turned into an invalidation."""
    clock = Clock()
    env = make_env(tmp_path, clock=clock)
    run_id, _action = paused_run(env)
    env.with_policy(version="rolled-out-later")
    clock.now += dt.timedelta(hours=4, seconds=1)
    assert env.engine.sweep().expired == 1
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest).where(ApprovalRequest.run_id == run_id)).one()
    assert request.status == "expired"
    assert env.workspace.effects() == []


def _statuses(env) -> list[str]:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        return list(s.scalars(select(ApprovalRequest.status).order_by(ApprovalRequest.created_at)))


def test_a_failed_expiry_notice_strands_no_request(tmp_path):
    """Every expired request is resumed (rejected) even when a notice to Slack fails."""
    clock = Clock()
    env = make_env(tmp_path, clock=clock)
    paused_run(env)
    paused_run(env)
    told = env.notes.approval_expired

    def flaky(approval):  # type: ignore[no-untyped-def]
        if env.notes.expired:
            raise TimeoutError("slack did not answer")
        told(approval)

    env.notes.approval_expired = flaky  # type: ignore[method-assign]
    clock.now += dt.timedelta(hours=5)
    assert env.engine.sweep().expired == 2
    assert _statuses(env) == ["expired", "expired"]


def test_each_expired_request_is_claimed_only_when_its_resume_can_start(tmp_path):
    """No claim waits, unrenewed, behind another request's resume: the next request is
    still pending while the first is handed over."""
    clock = Clock()
    env = make_env(tmp_path, clock=clock)
    paused_run(env)
    paused_run(env)
    clock.now += dt.timedelta(hours=5)
    due = env.engine.sweeper.expire_due()
    next(due)
    assert _statuses(env) == ["resuming", "pending"]
    next(due)
    assert _statuses(env) == ["resuming", "resuming"]


def test_an_approval_left_pending_by_an_ended_run_is_neither_reminded_nor_expired(tmp_path):
    """A run ended by an older version, which left its approval pending: nobody is asked to
    review it again, nor told it expired; reconciling closes it."""
    clock = Clock()
    env = make_env(tmp_path, clock=clock)
    run_id, _action_id = paused_run(env)
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None
        RunRepository(s).set_status(run, RunStatus.FAILED, result_text="The agent failed")
    clock.now += dt.timedelta(hours=5)
    assert env.engine.sweep() == SweepResult(expired=0, reminded=0)
    assert env.notes.reminded == [] and env.notes.expired == []
    assert env.engine.reconcile().closed == 1
