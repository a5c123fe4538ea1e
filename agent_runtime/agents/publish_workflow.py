"""The strict publish workflow, enforced by the graph rather than by a prompt:

draft -> deterministic validation -> rubric gate -> publish proposal (human approval in Slack)
-> publish -> audit. Only a ``satisfied`` rubric reaches the proposal; ``needs_revision`` sends
the per-criterion gaps back to the drafter up to ``max_iterations``; ``failed``,
``max_iterations_reached`` and ``grader_error`` stop the run with a message and no card. The
publish node checks the rubric status and the content hash itself, however it was reached.

Deterministic checks decide first and alone: a draft that fails validation, or carries
placeholder text or a broadcast, never reaches the grader. With a real model the grader is an
LLM judge (``rubric_grader``); offline it is ``rubric.grade_by_rules``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, interrupt

from agent_runtime.agents import rubric
from agent_runtime.agents.rubric_grader import ModelRubricGrader
from agent_runtime.agents.workspace import Workspace
from agent_runtime.gate import EffectGate, GateRefused
from agent_runtime.offline_model import OfflineChatModel
from agent_runtime.wire import review_request
from agent_runtime.workflow_audit import WorkflowAudit

logger = logging.getLogger(__name__)
Drafter = Callable[[str, dict[str, int], list[str]], str]
REPORT_PATH = "reports/publish-candidate.md"


class PublishState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    draft: str
    feedback: list[str]
    iterations: int
    rubric_status: str
    criteria: list[dict[str, str]]
    content_hash: str
    stop_reason: str
    grader: str
    grader_iteration: int
    grader_memory: dict[str, Any]


def model_drafter(model: BaseChatModel) -> Drafter:
    """With a real model: ask it for the report; the checks after it stay deterministic."""

    def draft(request: str, sales: dict[str, int], feedback: list[str]) -> str:
        prompt = (
            f"Write a short markdown sales report for: {request}\nData by region: {sales}\n"
            "Start with '# <title>', then 'Period: ...', 'Total: <sum>', one line per region, "
            "and a '## Summary' section."
            + (f"\nFix these gaps: {'; '.join(feedback)}" if feedback else "")
        )
        return str(model.invoke([HumanMessage(prompt)]).content)

    return draft


@dataclass
class PublishNodes:
    """The workflow's nodes; each is a plain method so the graph wiring stays readable."""

    workspace: Workspace
    drafter: Drafter
    grader: rubric.Grader
    gate: EffectGate | None
    audit: WorkflowAudit | None
    max_iterations: int

    def _sales(self) -> dict[str, int]:
        return rubric.load_sales(self.workspace.resolve(rubric.SOURCE_DATA))

    def draft(self, state: PublishState) -> PublishState:
        human = [m for m in state.get("messages", []) if isinstance(m, HumanMessage)]
        request = human[0].text if human else ""
        text = self.drafter(request, self._sales(), state.get("feedback", []))
        target = self.workspace.resolve(REPORT_PATH)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return {"draft": text, "iterations": state.get("iterations", 0) + 1}

    def validate(self, state: PublishState) -> PublishState:
        problems = rubric.validate(state["draft"], self._sales())
        if not self.workspace.resolve(REPORT_PATH).exists():
            problems.append("the report file does not exist")
        return {"feedback": problems, "content_hash": rubric.content_hash(state["draft"])}

    def grade(self, state: PublishState) -> PublishState:
        if state.get("feedback"):
            problems = state["feedback"]
            failing = [
                {"name": "deterministic validation", "verdict": "fail", "gap": p} for p in problems
            ]
            return self._settle(state, "needs_revision", failing)
        banned = rubric.forbidden(state["draft"])
        if banned:
            gap = "; ".join(banned)
            failing = [{"name": "no placeholders or broadcasts", "verdict": "fail", "gap": gap}]
            return self._settle(state, "failed", failing)
        try:
            grading = self.grader(
                state["draft"], self._sales(), memory=state.get("grader_memory", {})
            )
        except Exception as exc:
            logger.exception("the rubric grader failed")
            return {"rubric_status": "grader_error", "stop_reason": f"the grader failed: {exc}"}
        criteria = [c.as_dict() for c in grading.criteria]
        return {
            **self._settle(state, grading.status, criteria, explanation=grading.explanation),
            "grader": grading.grader,
            "grader_iteration": grading.iteration,
            "grader_memory": dict(grading.memory),
        }

    def _settle(
        self,
        state: PublishState,
        status: str,
        criteria: list[dict[str, str]],
        *,
        explanation: str = "",
    ) -> PublishState:
        """Where a verdict leads: back to the drafter with the gaps, or to a stop."""
        gaps = [c["gap"] for c in criteria if c.get("verdict") == "fail" and c.get("gap")]
        drafts = state.get("iterations", 0)
        if status == "needs_revision" and drafts >= self.max_iterations:
            status = "max_iterations_reached"
        why = "; ".join(gaps) or explanation
        reasons = {
            "max_iterations_reached": f"still not satisfied after {drafts} drafts: {why}",
            "failed": f"the rubric failed the report: {why}",
            "grader_error": f"the grader failed: {explanation[:300]}",
        }
        if status in reasons:
            return {"rubric_status": status, "criteria": criteria, "stop_reason": reasons[status]}
        feedback = gaps or ([explanation] if status == "needs_revision" and explanation else [])
        return {"rubric_status": status, "criteria": criteria, "feedback": feedback}

    @staticmethod
    def after_grade(state: PublishState) -> str:
        status = str(state.get("rubric_status"))
        return {"satisfied": "propose", "needs_revision": "draft"}.get(status, "stop")

    @staticmethod
    def propose(state: PublishState) -> PublishState:
        """Free of side effects: it runs again when the run resumes."""
        answer = interrupt(
            review_request(
                kind="publish_report",
                name="publish_report",
                args={
                    "path": REPORT_PATH,
                    "channel": "public",
                    "content_hash": state.get("content_hash", ""),
                },
                description="Publish this report publicly. The rubric is satisfied.",
                preview=state["draft"],
                allowed_decisions=("approve", "reject"),
                evidence={
                    "rubric_verdict": state.get("rubric_status", ""),
                    "grader": state.get("grader", ""),
                    "grader_iteration": state.get("grader_iteration", 0),
                    "criteria": state.get("criteria", []),
                    "content_hash": state.get("content_hash", ""),
                },
            )
        )
        return {"feedback": [f"decision:{answer.get('type')}:{answer.get('message', '')}"]}

    def publish(self, state: PublishState, config: RunnableConfig) -> PublishState:
        decision = (state.get("feedback") or ["decision:none:"])[0].split(":", 2)
        status = state.get("rubric_status")
        if status != "satisfied":
            return _end(f"Refused to publish: the rubric status is {status!r}, not 'satisfied'.")
        report = self.workspace.resolve(REPORT_PATH)
        text = report.read_text(encoding="utf-8") if report.exists() else ""
        current = rubric.content_hash(text) if report.exists() else ""
        if current != state.get("content_hash"):
            return _end("Refused to publish: the report changed after it was checked.")
        if decision[1] != "approve":
            return _end(f"Not published: the reviewer said no ({decision[2] or 'no reason'}).")

        def effect() -> str:
            # The very text that was hashed, checked and approved; not the file as it is now.
            target = self.workspace.resolve(f"published/public/{report.name}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            self.workspace.record_effect("publish_report", path=REPORT_PATH, hash=current)
            return f"published {REPORT_PATH} (sha256 {current[:12]})"

        # The gate binds the approval to the content's hash, not only to the path.
        args = {"path": REPORT_PATH, "channel": "public", "content_hash": current}
        try:
            result = (
                self.gate.run(config, tool_name="publish_report", args=args, effect=effect)
                if self.gate is not None
                else effect()
            )
        except GateRefused as exc:
            return _end(str(exc))
        if self.audit is not None:
            detail = {"rubric_verdict": status, "content_hash": current, "decision": decision[1]}
            self.audit(config, "report_published", detail)
        return _end(f"Report published: {result}.")

    @staticmethod
    def stop(state: PublishState) -> PublishState:
        return _end(f"Stopped before approval: {state.get('stop_reason', 'unknown reason')}.")


def build_publish_workflow(
    checkpointer: Checkpointer,
    *,
    workspace: Workspace,
    model: BaseChatModel | None = None,
    gate: EffectGate | None = None,
    audit: WorkflowAudit | None = None,
    drafter: Drafter | None = None,
    grader: rubric.Grader | None = None,
    max_iterations: int = 3,
) -> CompiledStateGraph:
    """With a real ``model`` it drafts and an LLM judge grades; offline both are rules. The
    checks between them are deterministic either way."""
    if model is None or isinstance(model, OfflineChatModel):
        drafter = drafter or rubric.offline_draft
        grader = grader or rubric.grade_by_rules
    else:
        drafter = drafter or model_drafter(model)
        grader = grader or ModelRubricGrader(model, max_iterations=max_iterations)
    nodes = PublishNodes(
        workspace=workspace,
        drafter=drafter,
        grader=grader,
        gate=gate,
        audit=audit,
        max_iterations=max_iterations,
    )
    graph = StateGraph(PublishState)
    for name in ("draft", "validate", "grade", "propose", "publish", "stop"):
        graph.add_node(name, getattr(nodes, name))
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "validate")
    graph.add_edge("validate", "grade")
    graph.add_conditional_edges("grade", nodes.after_grade, ["draft", "propose", "stop"])
    graph.add_edge("propose", "publish")
    graph.add_edge("publish", END)
    graph.add_edge("stop", END)
    return graph.compile(checkpointer=checkpointer, name="publish-workflow")


def _end(text: str) -> PublishState:
    return {"messages": [AIMessage(content=text)]}


def build_agent(checkpointer: Checkpointer, **offers: Any) -> CompiledStateGraph:
    """``AGENT=agent_runtime.agents.publish_workflow:build_agent``."""
    return build_publish_workflow(
        checkpointer,
        workspace=offers["workspace"],
        model=offers.get("model"),
        gate=offers.get("gate"),
        audit=offers.get("audit"),
    )
