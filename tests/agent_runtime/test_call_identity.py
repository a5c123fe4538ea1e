"""A call's identity as the store keeps it: a model may make tool-call ids of any length, and
the review, the point-of-effect gate and the evidence of what ran must still find each other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import delete, select

from agent_runtime import evidence
from agent_runtime.call_identity import call_id_of, kept_call_id
from agent_runtime.graph_runtime import close_checkpointer
from store.audit_models import AuditEvent
from store.models import CALL_ID_LENGTH, Action, ActionExecution, ApprovalRequest
from tests.agent_runtime.engine_env import REVIEWER, SEND, Env, decide, make_env, paused_run

LONG_IDS = "tests.agent_runtime.custom_graphs:long_call_ids_agent"


@pytest.fixture
def env(tmp_path: Path, migrated_pg_url: str) -> Iterator[Env]:
    """On PostgreSQL, which refuses a value longer than its column (SQLite stores it)."""
    e = make_env(tmp_path, LONG_IDS, url=migrated_pg_url)
    yield e
    close_checkpointer(e.runtime.checkpointer)
    e.db.dispose()


def test_a_tool_call_id_longer_than_the_store_keeps_is_reviewed_run_once_and_told(env):
    run_id, action_id = paused_run(env, SEND)
    result = decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert result.refusal is None
    assert [e["tool"] for e in env.workspace.effects()] == ["send_external_message"]
    with env.db.transaction() as s:
        action = s.get(Action, action_id)
        assert action is not None and action.tool_call_id is not None
        assert len(action.tool_call_id) <= CALL_ID_LENGTH
        (execution,) = s.scalars(select(ActionExecution)).all()
        assert execution.tool_call_id == action.tool_call_id  # the gate found the review's call
        request = s.scalars(select(ApprovalRequest)).one()
        assert request.status == "resolved", request.outcome
        outcomes = s.scalars(select(AuditEvent).where(AuditEvent.kind == "tool_outcome")).all()
        assert [o.detail["preview"] for o in outcomes] == ["sent to a@example.com"]
    assert [r.id for r in env.notes.finished] == [run_id]

    # After a crash, what ran is read from the thread: the tool's own result message is
    # proof of its run, found by the id as the store keeps it (here with no execution record,
    # as for a tool that does not go through the gate).
    with env.db.transaction() as s:
        s.execute(delete(ActionExecution))
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        assert evidence.gaps(env.db, request, state=env.runtime.state(run_id)) == []


def test_a_kept_call_id_is_the_id_itself_when_it_fits_and_the_same_digest_each_time():
    short = "call_abc"
    long = "call_" + "y" * 200
    assert kept_call_id(short) == short == call_id_of(None, short)
    assert kept_call_id(long) == kept_call_id(long) == call_id_of(None, long)
    assert kept_call_id(long) != kept_call_id(long + "z")
    assert len(kept_call_id(long) or "") <= CALL_ID_LENGTH and kept_call_id(None) is None
    # A model's id made to look like one of ours (another call's digest, a node's task) is
    # not kept as it is, so it never stands for that call.
    for forged in (kept_call_id(long), "task:graph:abc", "once:1234"):
        assert forged is not None and kept_call_id(forged) != forged


ONE_ID_TWICE = "tests.agent_runtime.custom_graphs:one_call_id_twice_agent"
SENDS = (
    'send_external_message {"recipient": "a@example.com", "text": "hi"}\n'
    'send_external_message {"recipient": "b@example.com", "text": "hi"}\n'
    'send_external_message {"recipient": "c@example.com", "text": "hi"}'
)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_calls_sharing_a_tool_call_id_are_refused_and_the_others_reviewed(tmp_path, request, store):
    """The gate knows a call by its id, and so does the agent's review middleware when it
    maps decisions back to calls: two calls under one id could not each be bound to a review
    of its own (a reject of one drops both; which one ran would depend on timing and on the
    store). Both are refused as the policy refuses a call, on the card and to the agent; the
    call with an id of its own is reviewed, and runs once."""
    url = None if store == "sqlite" else request.getfixturevalue("migrated_pg_url")
    env = make_env(tmp_path, ONE_ID_TWICE, url=url)
    try:
        run_id, first = paused_run(env, SENDS)
        shown = env.notes.requested[-1]
        assert [a.tool_call_id for a in shown.actions][1:] == ["call_same", "call_same"]
        assert shown.actions[0].outcome is None, "its own id: reviewed"
        for shared in shown.actions[1:]:
            assert shared.outcome == "rejected"
            assert "call_same for more than one call" in shared.extra["policy_violation"]
            refused = decide(env, action_id=shared.id, actor=REVIEWER, decision="approve")
            assert refused.refusal is not None, "never offered for approval"
        assert decide(env, action_id=first, actor=REVIEWER, decision="approve").refusal is None
        assert [e["recipient"] for e in env.workspace.effects()] == ["a@example.com"]
        assert [r.id for r in env.notes.finished] == [run_id]
        told = [m.content for m in env.runtime.state(run_id).values["messages"]]
        assert any("for more than one call" in str(text) for text in told), "the agent is told"
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()
