"""An approval binds to what it was given against, besides the arguments: the environment, the
tool's version and its argument schema. A change before the resume invalidates it, and nothing
runs."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agent_runtime.catalog import ToolVersions
from store.models import Action, ApprovalRequest
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run


@pytest.fixture
def env(tmp_path):  # type: ignore[no-untyped-def]
    return make_env(tmp_path)


def refused_unrun(env, run_id: str, *, match: str, tool_call_id: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """The gate refuses the run's send (``match``: why), and its effect does not run."""
    from agent_runtime.gate import GateRefused
    from tests.agent_runtime.test_gate import SEND_ARGS, config

    ran: list[str] = []
    with pytest.raises(GateRefused, match=match):
        env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=lambda: ran.append("x") or "sent",
            tool_call_id=tool_call_id,
        )
    assert ran == []


def invalidated_because(env) -> str:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        assert request.status == "invalidated"
        return str(request.outcome)


def test_the_record_keeps_the_versions_it_was_reviewed_against(env):
    _run_id, action_id = paused_run(env)
    with env.db.transaction() as s:
        action = s.get(Action, action_id)
        assert action.schema_version == env.runtime.catalog.versions(action.tool_name).schema
        assert action.schema_version and len(action.schema_version) == 16
        assert action.request.environment is None  # the bundled policy names none


def test_a_tool_redeployed_with_a_new_version_invalidates_its_approval(env, monkeypatch):
    _run_id, action_id = paused_run(env)
    reviewed = env.runtime.catalog.versions("send_external_message")
    monkeypatch.setattr(
        env.runtime.catalog, "versions", lambda _name: ToolVersions("2.0", reviewed.schema)
    )
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    assert "changed from version unset to 2.0" in invalidated_because(env)
    assert env.workspace.effects() == []


def test_a_tool_whose_arguments_changed_invalidates_its_approval(env, monkeypatch):
    _run_id, action_id = paused_run(env)
    monkeypatch.setattr(env.runtime.catalog, "versions", lambda _name: ToolVersions(None, "new"))
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert "arguments send_external_message takes changed" in invalidated_because(env)
    assert env.workspace.effects() == []


def test_another_environment_invalidates_the_approval(env, monkeypatch):
    _run_id, action_id = paused_run(env)
    staging = env.policy.model_copy(update={"environment": "staging"})
    monkeypatch.setattr(env.engine.resumer, "policy", staging)
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert "environment changed from unset to staging" in invalidated_because(env)
    assert env.workspace.effects() == []


def test_a_reject_still_goes_through_whatever_changed(env, monkeypatch):
    """Refusing runs nothing under any version: the agent hears the reviewer."""
    _run_id, action_id = paused_run(env)
    monkeypatch.setattr(env.runtime.catalog, "versions", lambda _name: ToolVersions("9", "x"))
    decide(env, action_id=action_id, actor=REVIEWER, decision="reject", message="no")
    with env.db.transaction() as s:
        assert s.scalars(select(ApprovalRequest)).one().status == "resolved"


def test_the_gate_refuses_an_approval_given_against_another_version_of_the_tool(env, monkeypatch):
    """The point of effect checks the binding too: a resume taken over after a crash by a
    process with the redeployed tool, or a LangGraph server redeployed while the bot still
    builds the old package, must not spend an approval given against the old version."""
    from tests.agent_runtime.test_gate import approved_and_resuming

    run_id, _action_id = paused_run(env)
    approved_and_resuming(env, run_id)
    reviewed = env.gate.catalog.versions("send_external_message")
    monkeypatch.setattr(
        env.gate.catalog, "versions", lambda _name: ToolVersions("2.0", reviewed.schema)
    )
    refused_unrun(env, run_id, match="version")


def test_the_gate_refuses_an_approval_given_for_another_environment(env, monkeypatch):
    from agent_runtime.gate import GateRefused
    from tests.agent_runtime.test_gate import SEND_ARGS, approved_and_resuming, config

    run_id, _action_id = paused_run(env)
    approved_and_resuming(env, run_id)
    monkeypatch.setattr(
        env.gate, "policy", env.gate.policy.model_copy(update={"environment": "production"})
    )
    with pytest.raises(GateRefused, match="environment"):
        env.gate.run(config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=str)


def test_the_gate_refuses_an_approval_whose_request_holds_another_tool_redeployed_since(
    env, monkeypatch
):
    """Reviewers approved the request's actions together: another tool of the same request
    redeployed since is drift for every one of them at the point of effect, as at the resume."""
    from tests.agent_runtime.test_gate import approved_and_resuming

    run_id, action_id = paused_run(env)
    with env.db.transaction() as s:
        sent = s.get(Action, action_id)
        assert sent is not None
        sibling = Action(
            id="act_sibling",
            request_id=sent.request_id,
            position=1,
            tool_name="publish_post",
            args={"title": "t"},
            allowed_decisions=["approve"],
            approver_roles=[],
            action_hash=sent.action_hash,
            operation_id="op_sibling",
            outcome="approved",
            tool_version="1.0",
        )
        s.add(sibling)
    approved_and_resuming(env, run_id)
    real = env.gate.catalog.versions

    def versions(name: str) -> ToolVersions:
        now = real(name)
        return ToolVersions("2.0", now.schema) if name == "publish_post" else now

    monkeypatch.setattr(env.gate.catalog, "versions", versions)
    refused_unrun(env, run_id, match=r"publish_post changed from version 1\.0 to 2\.0")


def test_a_call_cut_short_whose_tool_changed_since_is_refused_for_that_and_told(env, monkeypatch):
    """The call spent its approval and its process died inside the effect; the tool was then
    redeployed. The call run again is refused because the approval no longer holds, and its
    thread hears that (not that the call is already running, which no one would hear)."""
    from tests.agent_runtime.test_gate import SEND_ARGS, approved_and_resuming, config

    run_id, action_id = paused_run(env)
    approved_and_resuming(env, run_id)
    with env.db.transaction() as s:
        action = s.get(Action, action_id)
        assert action is not None and action.tool_call_id
        call_id = action.tool_call_id
    grant = env.gate.authorize(
        config(run_id), tool_name="send_external_message", args=SEND_ARGS, tool_call_id=call_id
    )
    assert grant is not None and grant.stored_result is None  # then the process died
    reviewed = env.gate.catalog.versions("send_external_message")
    monkeypatch.setattr(
        env.gate.catalog, "versions", lambda _name: ToolVersions("2.0", reviewed.schema)
    )
    refused_unrun(env, run_id, match="its approval no longer holds", tool_call_id=call_id)
    assert [reason for _run, _tool, reason in env.notes.blocked] == [
        f"its approval no longer holds: send_external_message changed from version "
        f"{reviewed.tool or 'unset'} to 2.0 since it was reviewed"
    ]
