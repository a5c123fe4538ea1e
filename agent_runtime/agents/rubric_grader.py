"""The model's rubric grader, through Deep Agents' ``RubricMiddleware`` (a beta interface).

Everything the project relies on in that middleware (its statuses, the fields of an evaluation
and of a criterion, its iteration count, the state keys it keeps its bookkeeping in) is read in
this module and nowhere else; ``tests/agent_runtime/test_rubric_grader.py`` pins it.

One call grades one draft. The workflow keeps its own draft -> validate -> grade loop, because
deterministic validation must run before every grading and decide alone what it can; so the
adapter runs the middleware's two hooks for a single evaluation, and hands its bookkeeping back
to the workflow (``Grading.memory``) to be passed in with the next draft. The middleware's own
counting, ``max_iterations_reached``, ``grader_error`` and its frozen criterion list then work
across the workflow's drafts as they would across an agent's turns.

What the grader trusts: the rubric below, from code, and the middleware's grader prompt. The
draft and the source data reach it only as the transcript, which that prompt treats as
untrusted. It gets no tools at all: it reads, it cannot act.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, cast, get_args

from deepagents.middleware import RubricMiddleware, RubricResult, RubricState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.runtime import Runtime

from agent_runtime.agents.rubric import CriterionResult, Grading, RubricStatus

PUBLISH_RUBRIC = """\
1. The report has a '## Summary' section that states the main finding in one or two sentences.
2. The report names every region that appears in the source data.
3. Every figure and claim in the report is supported by the source data; nothing is invented.
4. The report contains no placeholder text (TODO, TBD, lorem ipsum) and no Slack broadcast
   (@here, @channel, <!here>, <!channel>, <!everyone>).
5. The report is written for a public audience: neutral, factual, no internal jargon."""
"""The workflow's rubric. Trusted configuration: never built from the request or the draft."""

BOOKKEEPING_KEYS = (
    "_rubric_status",
    "_rubric_iterations",
    "_rubric_evaluations",
    "_current_grading_run_id",
    "_active_rubric",
    "_rubric_criteria",
)
"""The middleware's state keys the adapter keeps between drafts."""


def _literal_values(hint: Any) -> frozenset[str]:
    """The strings of a ``Literal`` or of a union of them."""
    args = get_args(hint)
    if all(isinstance(a, str) for a in args):
        return frozenset(args)
    return frozenset(v for a in args for v in _literal_values(a))


STATUSES = _literal_values(RubricResult)
"""What the middleware can record; ``rubric.RubricStatus`` must name the same five."""


class GraderContractError(RuntimeError):
    """The middleware answered in a shape this adapter does not know (its beta interface
    changed): the draft is not graded, and the workflow stops with ``grader_error``."""


class ModelRubricGrader:
    """An LLM judge: ``RubricMiddleware``'s grader sub-agent on ``model``, with no tools."""

    def __init__(
        self, model: BaseChatModel, *, rubric: str = PUBLISH_RUBRIC, max_iterations: int = 3
    ) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*RubricMiddleware.* is in beta")
            self._middleware: RubricMiddleware[Any, Any] = RubricMiddleware(
                model=model, tools=(), max_iterations=max_iterations
            )
        self._rubric = rubric

    def __call__(self, report: str, sales: dict[str, int], *, memory: Mapping[str, Any]) -> Grading:
        state = cast(
            RubricState,
            {
                **{k: v for k, v in memory.items() if k in BOOKKEEPING_KEYS},
                "rubric": self._rubric,
                "messages": transcript(report, sales),
            },
        )
        runtime: Runtime[Any] = Runtime()
        state.update(self._middleware.before_agent(state, runtime) or {})  # type: ignore[typeddict-item]
        state.update(self._middleware.after_agent(state, runtime) or {})  # type: ignore[typeddict-item]
        return read_state(state)


def transcript(report: str, sales: dict[str, int]) -> list[AnyMessage]:
    """What the grader judges: the task as the workflow set it, and the draft."""
    data = ", ".join(f"{region}={amount}" for region, amount in sales.items())
    task = f"Write the public sales report from this source data (region=amount): {data}"
    return [HumanMessage(task), AIMessage(report)]


def read_state(state: Mapping[str, Any]) -> Grading:
    """The middleware's state after one evaluation, as the workflow uses it."""
    try:
        status = state["_rubric_status"]
        iterations = state["_rubric_iterations"]
        last = state["_rubric_evaluations"][-1]
        result, explanation, criteria = last["result"], last["explanation"], last["criteria"]
    except (KeyError, IndexError, TypeError) as exc:
        raise GraderContractError(f"no evaluation in the grader's state: {exc!r}") from exc
    if status not in STATUSES or status not in get_args(RubricStatus) or status != result:
        raise GraderContractError(f"unknown or inconsistent status {status!r} / {result!r}")
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise GraderContractError(f"iteration count {iterations!r} is not an int")
    return Grading(
        status=status,
        criteria=tuple(read_criterion(c) for c in criteria),
        iteration=iterations,
        explanation=str(explanation),
        grader="model",
        memory={k: state[k] for k in BOOKKEEPING_KEYS if k in state},
    )


def read_criterion(item: Mapping[str, Any]) -> CriterionResult:
    """``{"name", "passed": True}`` or ``{"name", "passed": False, "gap"}``."""
    try:
        name, passed = item["name"], item["passed"]
        gap = "" if passed is True else item["gap"]
    except (KeyError, TypeError) as exc:
        raise GraderContractError(f"criterion {item!r} lacks {exc}") from exc
    if not isinstance(passed, bool):
        raise GraderContractError(f"criterion {name!r}: passed={passed!r} is not a bool")
    return CriterionResult(str(name), "pass" if passed else "fail", str(gap))
