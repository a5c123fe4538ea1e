from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent_runtime.offline_model import HELP_TEXT, OfflineChatModel, keyword_calls, parse_tool_lines


def test_each_tool_line_becomes_one_call_in_one_turn():
    text = 'publish_report {"path": "a.md"}\nnot a call\nask_user {"question": "which?"}'
    reply = OfflineChatModel().invoke([HumanMessage(text)])
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("publish_report", {"path": "a.md"}),
        ("ask_user", {"question": "which?"}),
    ]
    assert reply.tool_calls == OfflineChatModel().invoke([HumanMessage(text)]).tool_calls


def test_bad_json_and_non_objects_are_ignored():
    assert parse_tool_lines('t {"a": }\nu [1, 2]\nv {"ok": true}') == [("v", {"ok": True})]


def test_keyword_rules_map_plain_requests():
    assert keyword_calls("please publish the weekly report")[0][0] == "publish_report"
    assert keyword_calls("delete the old notes")[0][0] == "delete_project_file"
    assert keyword_calls("hello there") == []
    assert OfflineChatModel().invoke([HumanMessage("hello there")]).content == HELP_TEXT


def test_after_tools_it_summarises_their_results():
    messages = [
        HumanMessage("x"),
        AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": "1"}]),
        ToolMessage("it worked", tool_call_id="1", name="t"),
        ToolMessage("nope", tool_call_id="2", name="u", status="error"),
    ]
    text = OfflineChatModel().invoke(messages).content
    assert "t done: it worked" in text and "u failed: nope" in text
