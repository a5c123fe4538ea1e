"""An agent that keeps proposing calls the policy refuses is stopped, not looped forever:
each refusal is answered at once without anyone, so nothing else would end it."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.run_end import CLOSED_WITH_RUN
from store.audit_models import AuditEvent
from store.models import ApprovalRequest, Run, new_id, utcnow
from store.repositories import ApprovalRepository
from store.statuses import RequestStatus
from tests.agent_runtime.custom_graphs import MANY_AT_ONCE, STUBBORN_LIMIT
from tests.agent_runtime.engine_env import REQUESTER, make_env

STUBBORN = "tests.agent_runtime.custom_graphs:stubborn_sender"


def test_a_run_is_stopped_after_too_many_calls_the_policy_refused(tmp_path):
    env = make_env(tmp_path, agent=STUBBORN)
    limit = env.policy.defaults.max_policy_refusals
    assert limit < STUBBORN_LIMIT
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="tell the boss")
        env.engine.execute_run(run.id)
        with env.db.transaction() as s:
            stored = s.get(Run, run.id)
            assert stored is not None
            assert stored.status == "failed"
            refused = f"the approval policy refuses ({limit + 1} times in a row)"
            assert refused in (stored.result_text or "")
            requests = list(
                s.scalars(select(ApprovalRequest).where(ApprovalRequest.run_id == run.id))
            )
            kinds = list(s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run.id)))
        assert len(requests) == limit + 1  # the one past the limit is kept, and not resumed
        statuses = sorted(r.status for r in requests)
        assert statuses == ["invalidated"] + ["resolved"] * limit
        assert "run_failed" in kinds
        (stopped,) = [r.id for r in requests if r.status == "invalidated"]
        with env.db.transaction() as s:
            ends = s.scalars(
                select(AuditEvent.reason).where(
                    AuditEvent.request_id == stopped, AuditEvent.kind == "invalidated"
                )
            ).all()
        assert ends == [stored.result_text], "its own end is in its audit trail, as any other's"
        assert [f.id for f in env.notes.finished] == [run.id]
        assert env.notes.requested == []  # no card for any of them: nobody was asked
        assert env.workspace.effects() == []
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_one_proposal_of_many_refused_calls_is_one_refusal(tmp_path):
    """Six calls refused in one proposal are one round: the agent is told, and may stop."""
    env = make_env(tmp_path, agent="tests.agent_runtime.custom_graphs:many_refused_at_once")
    assert env.policy.defaults.max_policy_refusals < MANY_AT_ONCE
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="tell the bosses")
        env.engine.execute_run(run.id)
        with env.db.transaction() as s:
            stored = s.get(Run, run.id)
            request = s.scalars(select(ApprovalRequest).where(ApprovalRequest.run_id == run.id))
            only = request.one()
            assert len(only.actions) == MANY_AT_ONCE
            assert stored is not None
            assert (stored.status, only.status) == ("completed", "resolved"), stored.result_text
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_run_stopped_for_its_refusals_closes_its_other_open_approval(tmp_path, request, store):
    """Another approval of the run (a parallel branch's) must not keep its buttons on a run
    that has ended."""
    url = request.getfixturevalue("migrated_pg_url") if store == "postgresql" else None
    env = make_env(tmp_path, agent=STUBBORN, url=url)
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="tell the boss")
        other = _pending_request(env, run.id)
        env.engine.execute_run(run.id)
        with env.db.transaction() as s:
            stored = s.get(Run, run.id)
            closed = s.get(ApprovalRequest, other)
            assert stored is not None and closed is not None
            assert (stored.status, closed.status) == ("failed", "invalidated")
            assert closed.outcome == CLOSED_WITH_RUN
            kinds = list(s.scalars(select(AuditEvent.kind).where(AuditEvent.request_id == other)))
        assert kinds == ["invalidated"]
        assert [f.id for f in env.notes.finished] == [run.id]
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def _pending_request(env, run_id: str) -> str:  # type: ignore[no-untyped-def]
    now = utcnow()
    with env.db.transaction() as s:
        request = ApprovalRequest(
            id=new_id("apr"),
            run_id=run_id,
            interrupt_id="another-branch",
            kind="hitl_batch",
            status=RequestStatus.PENDING,
            policy_version=env.policy.version,
            requester_id=REQUESTER.user_id,
            team_id=REQUESTER.team_id,
            expires_at=now + dt.timedelta(hours=1),
            created_at=now,
        )
        ApprovalRepository(s).add(request, [])
        return request.id
