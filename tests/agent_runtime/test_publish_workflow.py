"""The publish workflow: rubric gate before human approval, enforced by the graph."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agent_runtime.authorization import Actor
from store.audit_models import AuditEvent
from tests.agent_runtime.custom_graphs import LLM_GRADERS
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run
from tests.agent_runtime.scripted_grader import REGIONS, SUMMARY

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


def llm(name: str) -> str:
    return f"tests.agent_runtime.custom_graphs:llm_{name}"


def test_with_a_model_the_llm_verdict_per_criterion_is_on_the_card(tmp_path):
    env = make_env(tmp_path, agent=llm("revise_then_satisfied"))
    _, action_id = paused_run(env, "Weekly sales report")
    grader = LLM_GRADERS[-1]
    assert len(grader.prompts) == 2 and grader.script == []
    evidence = env.notes.requested[-1].actions[0].extra["evidence"]
    assert evidence["rubric_verdict"] == "satisfied"
    assert (evidence["grader"], evidence["grader_iteration"]) == ("model", 2)
    assert evidence["criteria"] == [
        {"name": SUMMARY, "verdict": "pass", "gap": ""},
        {"name": REGIONS, "verdict": "pass", "gap": ""},
    ]
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    decide(env, action_id=action_id, actor=REL2, decision="approve")
    assert [e["hash"] for e in env.workspace.effects()] == [evidence["content_hash"]]


def test_the_llm_graders_gaps_reach_the_drafter(tmp_path):
    env = make_env(tmp_path, agent=llm("revise_then_satisfied"))
    run_id, _ = paused_run(env, "Weekly sales report")
    assert "## Summary" in env.runtime.state(run_id).values["draft"]
    second_prompt = str(LLM_GRADERS[-1].prompts[1][-1].content)
    assert "## Summary" in second_prompt.rsplit("<transcript-", maxsplit=1)[-1]


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        ("failed", "the rubric failed the report: the rubric cannot be applied to this report"),
        ("never_satisfied", "still not satisfied after 3 drafts: add a '## Summary' section"),
        ("unavailable", "the grader failed: Grader raised RuntimeError"),
    ],
)
def test_an_llm_verdict_other_than_satisfied_never_reaches_people(tmp_path, agent, said):
    env = make_env(tmp_path, agent=llm(agent))
    run_id = start(env)
    assert env.notes.requested == []
    assert said in env.notes.finished[-1].result_text
    assert env.workspace.effects() == []
    status = env.runtime.state(run_id).values["rubric_status"]
    expected = {"never_satisfied": "max_iterations_reached", "unavailable": "grader_error"}
    assert status == expected.get(agent, agent)


def test_a_draft_that_fails_validation_never_reaches_the_llm_grader(tmp_path):
    env = make_env(tmp_path, agent=llm("after_a_wrong_total"))
    run_id, _ = paused_run(env, "Weekly sales report")
    assert env.runtime.state(run_id).values["iterations"] == 2
    grader = LLM_GRADERS[-1]
    assert len(grader.prompts) == 1, "only the second, valid draft was graded"
    assert "Total: 3400" in str(grader.prompts[0][-1].content)


def test_a_broadcast_never_reaches_the_llm_grader(tmp_path):
    env = make_env(tmp_path, agent=llm("revise_then_satisfied"))
    start(env, "Weekly report <!channel>")
    assert env.notes.requested == []
    assert "the rubric failed the report: remove '<!channel>'" in env.notes.finished[-1].result_text
    assert LLM_GRADERS[-1].prompts == []
