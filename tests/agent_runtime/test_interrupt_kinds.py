"""Every kind of interrupt the example agents raise, decided and resumed through the engine."""

from __future__ import annotations

import json

from langchain_core.messages import ToolMessage

from agent_runtime.authorization import Actor
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run

REL2 = Actor("U0REL2", "T1")
SEC = Actor("U0SEC1", "T1")
SEND = 'send_external_message {"recipient": "a@example.com", "text": "hi"}'
PUBLISH = 'publish_report {"path": "reports/weekly.md", "channel": "public"}'
DELETE = 'delete_project_file {"path": "notes/old.txt"}'
ENV_CHANGE = 'replace_text_file {"path": "config/app.env", "content": "FEATURE_FLAG=on\\n"}'
PER_CALL = "agent_runtime.agents.change_request:build_per_call_agent"


def tool_messages(env, run_id):  # type: ignore[no-untyped-def]
    """One (tool, status, text) per result, in the order the model made the calls."""
    messages = env.runtime.state(run_id).values["messages"]
    calls = [c["id"] for m in messages for c in (getattr(m, "tool_calls", None) or [])]
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert len(results) == len([m for m in messages if isinstance(m, ToolMessage)])
    ordered = [results[c] for c in calls if c in results]
    return [(m.name, m.status, str(m.content)) for m in ordered]


def test_batch_approve_edit_reject_resumes_once_with_three_results_in_order(tmp_path):
    env = make_env(tmp_path)
    run_id, _ = paused_run(env, "\n".join([SEND, PUBLISH, DELETE]))
    send, publish, delete = env.notes.requested[-1].actions
    edited = {"path": "reports/weekly.md", "channel": "internal", "notify_subscribers": False}
    decide(env, action_id=send.id, actor=REVIEWER, decision="approve")
    decide(env, action_id=publish.id, actor=REVIEWER, decision="edit", edited_args=edited)
    decide(env, action_id=publish.id, actor=REL2, decision="approve")
    assert env.workspace.effects() == []
    last = decide(env, action_id=delete.id, actor=SEC, decision="reject", message="keep")
    assert last.completed

    results = tool_messages(env, run_id)
    assert [(name, status) for name, status, _ in results] == [
        ("send_external_message", "success"),
        ("publish_report", "success"),
        ("delete_project_file", "error"),
    ]
    assert "published reports/weekly.md to internal" in results[1][2]
    assert "keep" in results[2][2]
    assert sorted((e["tool"], e.get("channel") or "") for e in env.workspace.effects()) == [
        ("publish_report", "internal"),
        ("send_external_message", ""),
    ], "the tools run in parallel, so only the set of effects is fixed"


def test_custom_review_of_a_sensitive_file_approve(tmp_path):
    env = make_env(tmp_path)
    _run_id, action_id = paused_run(env, ENV_CHANGE)
    approval = env.notes.requested[-1]
    assert approval.actions[0].extra["review_kind"] == "sensitive_file_change"
    assert "+FEATURE_FLAG=on" in approval.actions[0].extra["preview"]
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert (env.workspace.root / "config/app.env").read_text() == "FEATURE_FLAG=on\n"


def test_custom_review_edit_writes_the_edited_content(tmp_path):
    env = make_env(tmp_path)
    _run_id, action_id = paused_run(env, ENV_CHANGE)
    edited = {"path": "config/app.env", "content": "FEATURE_FLAG=beta\n"}
    decide(env, action_id=action_id, actor=REVIEWER, decision="edit", edited_args=edited)
    assert (env.workspace.root / "config/app.env").read_text() == "FEATURE_FLAG=beta\n"


def test_custom_review_reject_changes_nothing(tmp_path):
    env = make_env(tmp_path)
    run_id, action_id = paused_run(env, ENV_CHANGE)
    decide(env, action_id=action_id, actor=REVIEWER, decision="reject", message="freeze")
    assert (env.workspace.root / "config/app.env").read_text() == "FEATURE_FLAG=off\n"
    assert env.workspace.effects() == []
    assert "freeze" in tool_messages(env, run_id)[0][2]


def test_subagent_interrupt_is_labelled_and_resumed_from_the_parent(tmp_path):
    env = make_env(tmp_path)
    task = {"description": SEND, "subagent_type": "release-coordinator"}
    _run_id, action_id = paused_run(env, "task " + json.dumps(task))
    action = env.notes.requested[-1].actions[0]
    assert (action.tool_name, action.extra["subagent"]) == (
        "send_external_message",
        "release-coordinator",
    )
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert [e["tool"] for e in env.workspace.effects()] == ["send_external_message"]
    assert env.notes.finished[-1].status == "completed"


def test_per_call_interrupts_get_one_card_each_and_each_tool_runs_once(tmp_path):
    env = make_env(tmp_path, agent=PER_CALL)
    run_id, _ = paused_run(env, f"{SEND}\n{ENV_CHANGE}")
    cards = env.notes.requested
    assert len(cards) == 2
    by_tool = {c.actions[0].tool_name: c.actions[0] for c in cards}
    decide(env, action_id=by_tool["send_external_message"].id, actor=REVIEWER, decision="approve")
    assert [e["tool"] for e in env.workspace.effects()] == ["send_external_message"]
    decide(env, action_id=by_tool["replace_text_file"].id, actor=REVIEWER, decision="approve")
    assert sorted(e["tool"] for e in env.workspace.effects()) == [
        "replace_text_file",
        "send_external_message",
    ]
    assert env.notes.finished[-1].status == "completed"
    assert len(tool_messages(env, run_id)) == 2
