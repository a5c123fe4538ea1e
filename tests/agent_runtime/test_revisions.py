"""The revision bookkeeping: which rejected call a new one revises, what the agent is told, and
the policy's refusal of a proposal past the limit (an agent that does not listen)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agent_runtime.revisions import (
    REVISE_HINT,
    over_the_limit,
    rejection_for_agent,
    revision_of,
)
from store.models import Action, ApprovalRequest
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run

SEND = 'send_external_message {"recipient": "partner@example.com", "text": "hi"}'


@pytest.fixture
def env(tmp_path):  # type: ignore[no-untyped-def]
    return make_env(tmp_path)


def rejected_actions(env) -> list[Action]:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        from store.run_history import RunHistory

        run_id = s.scalars(select(ApprovalRequest.run_id)).first()
        found = RunHistory(s).rejected_by_reviewers(run_id)
        for action in found:
            _ = action.decisions  # loaded before the session ends
        return found


def test_a_new_call_of_a_rejected_tool_is_its_numbered_revision(env):
    _run, action_id = paused_run(env, SEND)
    decide(env, action_id=action_id, actor=REVIEWER, decision="reject", message="wrong person")
    rejected = rejected_actions(env)
    revision = revision_of("send_external_message", rejected)
    assert revision is not None
    assert (revision["number"], revision["reason"]) == (1, "wrong person")
    assert revision["args"]["recipient"] == "partner@example.com"
    assert revision_of("delete_project_file", rejected) is None


def test_past_the_limit_the_policy_refuses_without_asking_anyone():
    assert over_the_limit(None, 0) is None
    assert over_the_limit({"number": 2}, 2) is None
    refusal = over_the_limit({"number": 3}, 2)
    assert refusal is not None and "allows 2 corrected calls" in refusal


def test_the_agent_is_told_what_it_may_do_next():
    open_ = rejection_for_agent(tool_name="send", reason="wrong person", revisions_left=2)
    assert (
        open_.startswith("wrong person.") and REVISE_HINT in open_ and "2 revisions left" in open_
    )
    closed = rejection_for_agent(tool_name="send", reason=" ", revisions_left=0)
    assert "no reason given" in closed and "may not be proposed again" in closed
    assert REVISE_HINT not in closed


def test_a_proposal_past_the_limit_is_refused_when_recorded(env):
    """An agent that does not listen: its next call of the rejected tool gets no card, it is
    rejected by the policy with the reason, and nobody is asked."""
    import datetime as dt

    from agent_runtime.recording import POLICY_VETO, build_request
    from agent_runtime.wire import ActionSpec, PendingInterrupt
    from store.models import Run

    run_id, action_id = paused_run(env, SEND)
    decide(env, action_id=action_id, actor=REVIEWER, decision="reject", message="wrong person")
    strict = env.policy.model_copy(
        update={"defaults": env.policy.defaults.model_copy(update={"max_revisions": 0})}
    )
    again = ActionSpec(
        name="send_external_message",
        args={"recipient": "partner@example.com", "text": "hi again"},
        description="",
        allowed_decisions=("approve", "reject"),
    )
    rejected = rejected_actions(env)
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        _request, (action,) = build_request(
            run,
            PendingInterrupt(interrupt_id="i2", kind="hitl_batch", actions=(again,)),
            policy=strict,
            catalog=env.runtime.catalog,
            now=dt.datetime.now(dt.UTC),
            tool_call_ids=[None],
            rejected=rejected,
        )
    assert action.outcome == "rejected"
    assert "allows 0 corrected calls" in action.extra[POLICY_VETO]
