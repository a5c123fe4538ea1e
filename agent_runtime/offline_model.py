"""A deterministic chat model for demos and tests: no network, no key, same answer every time.

Each request line ``<tool_name> <JSON object>`` becomes one tool call, all in one model turn (a
batch). A request without such lines is mapped by keyword rules onto the example tools. Once the
tools have answered, the model replies with a short summary of their results.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from agent_runtime.revisions import REVISE_HINT

_TOOL_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s+(\{.*\})\s*$")
_KEYWORD_RULES: tuple[tuple[tuple[str, ...], str, dict[str, Any]], ...] = (
    (("publish",), "publish_report", {"path": "reports/weekly.md"}),
    (("send", "email", "tell"), "send_external_message", {"recipient": "partner@example.com"}),
    (("delete", "remove"), "delete_project_file", {"path": "notes/old.txt"}),
    (("ask", "question"), "ask_user", {"question": "Which version should I use?"}),
    (("read", "report", "summary"), "read_public_report", {"path": "reports/weekly.md"}),
)
HELP_TEXT = (
    "I did not find anything to do. Write one action per line as `<tool_name> <JSON arguments>`,"
    " or ask me to read, publish, send, delete or ask."
)


def parse_tool_lines(text: str) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for line in text.splitlines():
        match = _TOOL_LINE.match(line)
        if not match:
            continue
        try:
            args = json.loads(match.group(2))
        except json.JSONDecodeError:
            continue
        if isinstance(args, dict):
            calls.append((match.group(1), args))
    return calls


def keyword_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    lowered = text.lower()
    for words, tool, args in _KEYWORD_RULES:
        if any(re.search(rf"\b{w}", lowered) for w in words):
            extra = {"text": text.strip()[:500]} if tool == "send_external_message" else {}
            return [(tool, {**args, **extra})]
    return []


class OfflineChatModel(BaseChatModel):
    """Plans tool calls from the request text; summarises tool results. Deterministic."""

    @property
    def _llm_type(self) -> str:
        return "offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if messages and isinstance(messages[-1], ToolMessage):
            revised = _revised_calls(messages)
            if revised:
                return AIMessage(content="", tool_calls=revised)
            return AIMessage(content=_summarise(messages))
        request = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        text = request.text if request is not None else ""
        calls = parse_tool_lines(text) or keyword_calls(text)
        if not calls:
            return AIMessage(content=HELP_TEXT)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
        return AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": args, "id": f"call_{digest}_{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(calls)
            ],
        )


_OBJECT = re.compile(r"\{.*\}", re.S)


def _revised_calls(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """A rejection that may be revised, whose reason carries a JSON object (``use {"recipient":
    "ops@example.com"}``): the same call with those arguments changed. Deterministic, like the
    rest of this model; a real model reads the reason in words."""
    calls = {
        call["id"]: call
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }
    revised: list[dict[str, Any]] = []
    for result in _trailing_results(messages):
        reason, hint, _rest = str(result.content).partition(REVISE_HINT)
        fix = _OBJECT.search(reason) if hint else None
        original = calls.get(result.tool_call_id)
        if fix is None or original is None:
            continue
        try:
            changes = json.loads(fix.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(changes, dict):
            args = {**original["args"], **changes}
            digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:8]
            call_id = f"call_rev_{digest}_{len(revised)}"
            revised.append(
                {"name": original["name"], "args": args, "id": call_id, "type": "tool_call"}
            )
    return revised


def _trailing_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return list(reversed(results))


def _summarise(messages: list[BaseMessage]) -> str:
    lines = []
    for result in _trailing_results(messages):
        marker = "failed" if result.status == "error" else "done"
        lines.append(f"- {result.name or 'tool'} {marker}: {str(result.content)[:300]}")
    return "Summary of the actions:\n" + "\n".join(lines)
