"""A grader model for tests: each call answers with the next scripted verdict (or raises the
scripted error). By default as the ``GraderResponse`` tool call the grader sub-agent asks a model
without native structured output for; ``native()`` gives one whose profile claims it, answering
with the JSON itself, as the providers' models do."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class ScriptedGrader(BaseChatModel):
    script: list[Any]
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-grader"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedGrader:
        self.bound_tools.append([convert_to_openai_tool(t)["function"]["name"] for t in tools])
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        if self.profile and self.profile.get("structured_output"):
            message = AIMessage(content=json.dumps(step))
        else:
            call = {"name": "GraderResponse", "args": step, "id": f"grade_{len(self.prompts)}"}
            message = AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def native(script: list[Any]) -> ScriptedGrader:
    return ScriptedGrader(script=script, profile={"structured_output": True})


def passes(name: str) -> dict[str, Any]:
    return {"name": name, "passed": True}


def fails(name: str, gap: str) -> dict[str, Any]:
    return {"name": name, "passed": False, "gap": gap}


def verdict(result: str, *criteria: dict[str, Any], explanation: str = "") -> dict[str, Any]:
    return {
        "result": result,
        "explanation": explanation or f"the report is {result}",
        "criteria": list(criteria),
    }


SUMMARY = "Report has a '## Summary' section stating the main finding"
REGIONS = "Report names every region in the source data"
SATISFIED = verdict("satisfied", passes(SUMMARY), passes(REGIONS))
NEEDS_SUMMARY = verdict(
    "needs_revision", fails(SUMMARY, "add a '## Summary' section"), passes(REGIONS)
)
