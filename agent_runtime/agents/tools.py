"""The example change-request tools. Each side effect is recorded in the workspace's effects log."""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.types import interrupt

from agent_runtime.agents.workspace import Workspace
from agent_runtime.gate import EffectGate
from agent_runtime.wire import review_request

CallId = Annotated[str, InjectedToolCallId]

EXAMPLE_TOOL_NAMES = (
    "read_public_report",
    "publish_report",
    "send_external_message",
    "delete_project_file",
    "replace_text_file",
    "ask_user",
)
SELF_REVIEWING = "self_review"
"""Tool metadata flag: the tool raises its own review interrupt, so HITL must not gate it too."""
SENSITIVE_MARKERS = (".env", "secret", "credential", "config/")


def is_sensitive(path: str) -> bool:
    lowered = path.lower()
    return any(marker in lowered for marker in SENSITIVE_MARKERS)


def _file_change_review(workspace: Workspace, path: str, content: str) -> dict[str, object]:
    """Computed before ``interrupt()`` and free of side effects: it re-runs on every resume."""
    target = workspace.resolve(path)
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    diff = "\n".join(
        difflib.unified_diff(
            before.splitlines(), content.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
        )
    )
    sensitive = is_sensitive(path)
    return review_request(
        kind="sensitive_file_change" if sensitive else "file_change",
        name="replace_text_file",
        args={"path": path, "content": content},
        description=(
            f"Replace {path}, a sensitive file (settings or secrets)."
            if sensitive
            else f"Replace the content of {path}."
        ),
        preview=diff or "(no change)",
    )


def make_tools(workspace: Workspace, gate: EffectGate | None = None) -> list[BaseTool]:
    """Every side effect goes through the point-of-effect gate: it runs only if people approved
    exactly this call, and a repeated call after a crash returns the first result."""

    def guarded(
        config: RunnableConfig,
        call_id: str,
        name: str,
        args: Mapping[str, Any],
        effect: Callable[[], str],
    ) -> str:
        if gate is None:  # outside the bot (scripts, unit tests): no store to ask
            return effect()
        return gate.run(config, tool_name=name, args=args, effect=effect, tool_call_id=call_id)

    @tool
    def read_public_report(path: str) -> str:
        """Read a report from the workspace."""
        return workspace.resolve(path).read_text(encoding="utf-8")[:4000]

    @tool
    def publish_report(
        config: RunnableConfig,
        call_id: CallId,
        path: str,
        channel: Literal["public", "internal"] = "public",
        notify_subscribers: bool = True,
    ) -> str:
        """Publish a report from the workspace to a channel (public or internal)."""

        def effect() -> str:
            source = workspace.resolve(path)
            target = workspace.resolve(f"published/{channel}/{source.name}")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            workspace.record_effect(
                "publish_report", path=path, channel=channel, notify=notify_subscribers
            )
            return f"published {path} to {channel}"

        args = {"path": path, "channel": channel, "notify_subscribers": notify_subscribers}
        return guarded(config, call_id, "publish_report", args, effect)

    @tool
    def send_external_message(
        config: RunnableConfig, call_id: CallId, recipient: str, text: str
    ) -> str:
        """Send a message to someone outside the company."""

        def effect() -> str:
            workspace.record_effect("send_external_message", recipient=recipient, text=text)
            return f"message sent to {recipient}"

        args = {"recipient": recipient, "text": text}
        return guarded(config, call_id, "send_external_message", args, effect)

    @tool
    def delete_project_file(config: RunnableConfig, call_id: CallId, path: str) -> str:
        """Delete a file from the project workspace."""

        def effect() -> str:
            workspace.resolve(path).unlink()
            workspace.record_effect("delete_project_file", path=path)
            return f"deleted {path}"

        return guarded(config, call_id, "delete_project_file", {"path": path}, effect)

    @tool(extras={SELF_REVIEWING: True})
    def replace_text_file(config: RunnableConfig, call_id: CallId, path: str, content: str) -> str:
        """Replace the whole content of a text file in the workspace (reviewed with a diff)."""
        answer = interrupt(_file_change_review(workspace, path, content))
        if answer.get("type") == "reject":
            return f"Not changed: a reviewer rejected it ({answer.get('message', 'no reason')})."
        if answer.get("type") == "edit":
            path = str(answer["args"].get("path", path))
            content = str(answer["args"].get("content", content))
        elif answer.get("type") != "approve":
            return f"Not changed: unexpected review answer {answer.get('type')!r}."

        def effect() -> str:
            target = workspace.resolve(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            workspace.record_effect("replace_text_file", path=path, size=len(content))
            return f"replaced {path} ({len(content)} characters)"

        done = {"path": path, "content": content}  # what the gate checks: the approved version
        return guarded(config, call_id, "replace_text_file", done, effect)

    @tool
    def ask_user(question: str) -> str:
        """Ask the requester a question; the answer comes back from Slack."""
        return "No answer was given."

    tools: list[BaseTool] = [
        read_public_report,
        publish_report,
        send_external_message,
        delete_project_file,
        replace_text_file,
        ask_user,
    ]
    for each in tools:
        each.handle_tool_error = True  # a gate refusal becomes an error result the agent reads
    if gate is not None:
        for each in tools:
            gate.catalog.add(each)
    return tools
