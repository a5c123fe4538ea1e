"""What the publish workflow relies on in Deep Agents' RubricMiddleware (beta), through our
adapter and a scripted grader model. A change in the middleware's statuses, evaluation fields,
criterion fields or iteration counting fails here first."""

from __future__ import annotations

import re
from typing import get_args

import pytest
from deepagents.middleware import RubricMiddleware
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent_runtime.agents import rubric
from agent_runtime.agents.rubric_grader import (
    PUBLISH_RUBRIC,
    STATUSES,
    GraderContractError,
    ModelRubricGrader,
    read_state,
)
from tests.agent_runtime.scripted_grader import (
    NEEDS_SUMMARY,
    REGIONS,
    SATISFIED,
    SUMMARY,
    ScriptedGrader,
    fails,
    native,
    passes,
    verdict,
)

SALES = {"north": 1200, "south": 800}
REPORT = "# Weekly\n\nPeriod: last week\nTotal: 2000\n- north: 1200\n- south: 800\n"


def grade_once(*script, max_iterations=3):  # type: ignore[no-untyped-def]
    model = ScriptedGrader(script=list(script))
    return ModelRubricGrader(model, max_iterations=max_iterations)(REPORT, SALES, memory={}), model


def test_the_middleware_records_exactly_the_statuses_the_workflow_handles():
    assert (
        set(get_args(rubric.RubricStatus))
        == STATUSES
        == {
            "satisfied",
            "needs_revision",
            "failed",
            "max_iterations_reached",
            "grader_error",
        }
    )


@pytest.mark.parametrize("strategy", ["tool call", "native structured output"])
def test_satisfied_with_every_criterion_passing(strategy):
    model = ScriptedGrader(script=[SATISFIED]) if strategy == "tool call" else native([SATISFIED])
    grading = ModelRubricGrader(model)(REPORT, SALES, memory={})
    assert grading.status == "satisfied"
    assert grading.iteration == 1
    assert grading.grader == "model"
    assert grading.criteria == (
        rubric.CriterionResult(SUMMARY, "pass", ""),
        rubric.CriterionResult(REGIONS, "pass", ""),
    )
    answer = ["GraderResponse"] if strategy == "tool call" else []
    assert model.bound_tools == [answer], "the grader has no tool but its answer"


def test_the_grader_reads_our_rubric_and_sees_the_draft_only_as_transcript():
    _, model = grade_once(SATISFIED)
    prompt = model.prompts[0][-1].content
    assert isinstance(prompt, str)
    rubric_block = re.search(r"<rubric-(\w+)>\n(.*?)\n</rubric-\1>", prompt, re.DOTALL)
    transcript = re.search(r"<transcript-(\w+)>\n(.*?)\n</transcript-\1>", prompt, re.DOTALL)
    assert rubric_block and transcript
    assert rubric_block.group(2) == PUBLISH_RUBRIC
    assert "Total: 2000" in transcript.group(2) and "north=1200" in transcript.group(2)


@pytest.mark.parametrize("make", [lambda s: ScriptedGrader(script=s), native])
def test_needs_revision_with_gaps_then_satisfied_counts_two_iterations(make):
    model = make([NEEDS_SUMMARY, SATISFIED])
    grader = ModelRubricGrader(model)
    first = grader(REPORT, SALES, memory={})
    assert first.status == "needs_revision" and first.iteration == 1
    assert first.criteria[0] == rubric.CriterionResult(
        SUMMARY, "fail", "add a '## Summary' section"
    )
    assert first.criteria[1].verdict == "pass"
    second = grader(REPORT + "\n## Summary\nnorth led.\n", SALES, memory=first.memory)
    assert second.status == "satisfied" and second.iteration == 2
    assert SUMMARY in str(model.prompts[1][-1].content), "the criteria are replayed to the grader"


def test_failed():
    grading, _ = grade_once(verdict("failed", explanation="the rubric cannot be evaluated"))
    assert grading.status == "failed"
    assert grading.explanation == "the rubric cannot be evaluated"
    assert grading.criteria == ()


def test_max_iterations_reached_on_the_last_needs_revision():
    model = ScriptedGrader(script=[NEEDS_SUMMARY, NEEDS_SUMMARY])
    grader = ModelRubricGrader(model, max_iterations=2)
    first = grader(REPORT, SALES, memory={})
    last = grader(REPORT, SALES, memory=first.memory)
    assert (first.status, last.status) == ("needs_revision", "max_iterations_reached")
    assert last.iteration == 2
    assert last.criteria[0].gap == "add a '## Summary' section"


def test_grader_error_when_the_grader_model_raises():
    grading, _ = grade_once(RuntimeError("provider unavailable"))
    assert grading.status == "grader_error"
    assert "provider unavailable" in grading.explanation
    assert grading.criteria == () and grading.iteration == 1


def test_a_new_grading_run_starts_after_a_terminal_status():
    model = ScriptedGrader(script=[SATISFIED, NEEDS_SUMMARY])
    grader = ModelRubricGrader(model)
    done = grader(REPORT, SALES, memory={})
    again = grader(REPORT, SALES, memory=done.memory)
    assert (done.iteration, again.iteration) == (1, 1)


def test_the_state_a_real_agent_keeps_reads_as_a_grading():
    """The middleware wrapped in an agent, as Deep Agents uses it: its checkpointed state."""
    drafts = iter([AIMessage("first draft"), AIMessage("second draft")])
    grader_model = ScriptedGrader(script=[NEEDS_SUMMARY, SATISFIED])
    agent = create_agent(
        GenericFakeChatModel(messages=drafts),
        middleware=[RubricMiddleware(model=grader_model, max_iterations=3)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("write it")], "rubric": PUBLISH_RUBRIC}, config)
    grading = read_state(agent.get_state(config).values)  # type: ignore[arg-type]
    assert grading.status == "satisfied" and grading.iteration == 2
    assert [c.verdict for c in grading.criteria] == ["pass", "pass"]
    assert len(grader_model.prompts) == 2


@pytest.mark.parametrize(
    "broken",
    [
        {"_rubric_iterations": 1, "_rubric_evaluations": []},
        {"_rubric_status": "satisfied", "_rubric_iterations": 1, "_rubric_evaluations": []},
        {"_rubric_status": "approved", "_rubric_iterations": 1},
    ],
)
def test_a_state_without_a_known_evaluation_is_a_contract_error(broken):
    with pytest.raises(GraderContractError):
        read_state(broken)


@pytest.mark.parametrize(
    "criterion",
    [
        {"name": "x", "ok": True},
        {"name": "x", "passed": False},
        {"title": "x", "passed": True},
        {"name": "x", "passed": "yes"},
    ],
)
def test_a_criterion_in_another_shape_is_a_contract_error(criterion):
    evaluation = {"result": "needs_revision", "explanation": "", "criteria": [criterion]}
    state = {
        "_rubric_status": "needs_revision",
        "_rubric_iterations": 1,
        "_rubric_evaluations": [evaluation],
    }
    with pytest.raises(GraderContractError):
        read_state(state)


def test_field_names_read_from_an_evaluation():
    state = {
        "_rubric_status": "needs_revision",
        "_rubric_iterations": 1,
        "_rubric_evaluations": [
            verdict("needs_revision", fails("a", "do a"), passes("b"), explanation="why")
        ],
    }
    grading = read_state(state)
    assert grading.explanation == "why"
    assert [c.as_dict() for c in grading.criteria] == [
        {"name": "a", "verdict": "fail", "gap": "do a"},
        {"name": "b", "verdict": "pass", "gap": ""},
    ]
