"""An agent that keeps proposing calls the policy refuses is stopped, not looped forever:
each refusal is answered at once without anyone, so nothing else would end it."""

from __future__ import annotations

from sqlalchemy import select

from agent_runtime.graph_runtime import close_checkpointer
from store.audit_models import AuditEvent
from store.models import ApprovalRequest, Run
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
