"""The publish workflow: rubric gate before human approval, enforced by the graph."""

from __future__ import annotations

from sqlalchemy import select

from agent_runtime.authorization import Actor
from store.models import AuditEvent
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run

WORKFLOW = "agent_runtime.agents.publish_workflow:build_agent"
REL2 = Actor("U0REL2", "T1")


def start(env, text="Weekly sales report"):  # type: ignore[no-untyped-def]
    run = env.engine.start_run(actor=Actor("U0ALICE", "T1"), channel_id="C1", text=text)
    env.engine.execute_run(run.id)
    return run.id


def test_needs_revision_then_satisfied_leads_to_a_card_and_after_approval_to_the_publish(tmp_path):
    env = make_env(tmp_path, agent=WORKFLOW)
    run_id, action_id = paused_run(env, "Weekly sales report")
    state = env.runtime.state(run_id).values
    assert state["iterations"] == 2, "the first draft needed a revision"
    card = env.notes.requested[-1].actions[0]
    evidence = card.extra["evidence"]
    assert evidence["rubric_verdict"] == "satisfied"
    assert {c["name"] for c in evidence["criteria"]} >= {"has a summary section"}
    assert len(evidence["content_hash"]) == 64
    assert env.workspace.effects() == []

    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert env.workspace.effects() == [], "publishing needs two release managers"
    decide(env, action_id=action_id, actor=REL2, decision="approve")
    published = env.workspace.effects()
    assert [(e["tool"], e["hash"]) for e in published] == [
        ("publish_report", evidence["content_hash"])
    ]
    assert "Report published" in env.notes.finished[-1].result_text
    with env.db.transaction() as s:
        event = s.scalars(select(AuditEvent).where(AuditEvent.kind == "report_published")).one()
    assert event.run_id == run_id
    assert event.detail == {
        "rubric_verdict": "satisfied",
        "content_hash": evidence["content_hash"],
        "decision": "approve",
    }


def test_a_draft_that_never_satisfies_stops_at_max_iterations_without_a_card(tmp_path):
    env = make_env(tmp_path, agent="tests.agent_runtime.custom_graphs:stubborn_publish")
    start(env)
    assert env.notes.requested == []
    finished = env.notes.finished[-1]
    assert finished.status == "completed"
    assert "still not satisfied after 2 drafts" in finished.result_text
    assert "Summary" in finished.result_text
    assert env.workspace.effects() == []


def test_a_grader_error_stops_the_run(tmp_path):
    env = make_env(tmp_path, agent="tests.agent_runtime.custom_graphs:broken_grader_publish")
    start(env)
    assert env.notes.requested == []
    assert "the grader failed: grader model unavailable" in env.notes.finished[-1].result_text


def test_a_failed_rubric_stops_the_run(tmp_path):
    env = make_env(tmp_path, agent=WORKFLOW)
    start(env, "Weekly report <!channel> TODO")
    assert env.notes.requested == []
    assert "the rubric failed the report" in env.notes.finished[-1].result_text


def test_a_forged_state_cannot_publish(tmp_path):
    env = make_env(tmp_path, agent=WORKFLOW)
    run_id, _ = paused_run(env, "Weekly sales report")
    runtime = env.runtime
    for forged in ("needs_revision", "failed", "grader_error", "max_iterations_reached"):
        runtime.graph.update_state(
            runtime.config(run_id),
            {"rubric_status": forged, "feedback": ["decision:approve:"]},
            as_node="propose",
        )
        runtime.graph.invoke(None, runtime.config(run_id))
        last = runtime.state(run_id).values["messages"][-1].content
        assert f"Refused to publish: the rubric status is '{forged}'" in last
    assert env.workspace.effects() == []
