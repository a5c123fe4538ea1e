"""The example change-request tools. Each side effect is recorded in the workspace's effects log."""

from __future__ import annotations

import shutil

from langchain_core.tools import BaseTool, tool

from agent_runtime.agents.workspace import Workspace

EXAMPLE_TOOL_NAMES = (
    "read_public_report",
    "publish_report",
    "send_external_message",
    "delete_project_file",
    "replace_text_file",
    "ask_user",
)


def make_tools(workspace: Workspace) -> list[BaseTool]:
    @tool
    def read_public_report(path: str) -> str:
        """Read a report from the workspace."""
        return workspace.resolve(path).read_text(encoding="utf-8")[:4000]

    @tool
    def publish_report(path: str, channel: str = "public") -> str:
        """Publish a report from the workspace to a channel (public or internal)."""
        source = workspace.resolve(path)
        target = workspace.resolve(f"published/{channel}/{source.name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        workspace.record_effect("publish_report", path=path, channel=channel)
        return f"published {path} to {channel}"

    @tool
    def send_external_message(recipient: str, text: str) -> str:
        """Send a message to someone outside the company."""
        workspace.record_effect("send_external_message", recipient=recipient, text=text)
        return f"message sent to {recipient}"

    @tool
    def delete_project_file(path: str) -> str:
        """Delete a file from the project workspace."""
        target = workspace.resolve(path)
        target.unlink()
        workspace.record_effect("delete_project_file", path=path)
        return f"deleted {path}"

    @tool
    def replace_text_file(path: str, content: str) -> str:
        """Replace the whole content of a text file in the workspace."""
        target = workspace.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        workspace.record_effect("replace_text_file", path=path, size=len(content))
        return f"replaced {path} ({len(content)} characters)"

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
