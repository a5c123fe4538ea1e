"""The example change-request tools. Each side effect is recorded in the workspace's effects log."""

from __future__ import annotations

import difflib
import shutil
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.types import interrupt

from agent_runtime.agents.workspace import Workspace
from agent_runtime.idempotency import run_once
from agent_runtime.wire import review_request
from store.ledger import EffectLedger

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


def make_tools(workspace: Workspace, ledger: EffectLedger | None = None) -> list[BaseTool]:
    """Side effects run through the ledger: a repeated approved call returns the first result."""

    @tool
    def read_public_report(path: str) -> str:
        """Read a report from the workspace."""
        return workspace.resolve(path).read_text(encoding="utf-8")[:4000]

    @tool
    def publish_report(
        config: RunnableConfig,
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
        return run_once(ledger, config, "publish_report", args, effect)

    @tool
    def send_external_message(config: RunnableConfig, recipient: str, text: str) -> str:
        """Send a message to someone outside the company."""

        def effect() -> str:
            workspace.record_effect("send_external_message", recipient=recipient, text=text)
            return f"message sent to {recipient}"

        args = {"recipient": recipient, "text": text}
        return run_once(ledger, config, "send_external_message", args, effect)

    @tool
    def delete_project_file(config: RunnableConfig, path: str) -> str:
        """Delete a file from the project workspace."""

        def effect() -> str:
            workspace.resolve(path).unlink()
            workspace.record_effect("delete_project_file", path=path)
            return f"deleted {path}"

        return run_once(ledger, config, "delete_project_file", {"path": path}, effect)

    @tool(extras={SELF_REVIEWING: True})
    def replace_text_file(config: RunnableConfig, path: str, content: str) -> str:
        """Replace the whole content of a text file in the workspace (reviewed with a diff)."""
        asked = {"path": path, "content": content}
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

        return run_once(ledger, config, "replace_text_file", asked, effect)

    @tool
    def ask_user(question: str) -> str:
        """Ask the requester a question; the answer comes back from Slack."""
        return "No answer was given."

    return [
        read_public_report,
        publish_report,
        send_external_message,
        delete_project_file,
        replace_text_file,
        ask_user,
    ]
