"""A LangGraph Server thread's JSON read as the engine reads a local thread."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent_runtime.remote_state import messages_of, snapshot_of
from agent_runtime.wire import final_text


class NoteMessage(BaseMessage):
    """A message type of the operator's own graph: LangChain cannot rebuild it from JSON."""

    type: str = "note"


def test_a_message_type_langchain_does_not_know_does_not_make_the_thread_unreadable():
    """The server keeps whatever message objects the graph put in its state; one the bot
    cannot rebuild must not stop it from reading the thread (and from resuming it, ever)."""
    raw = [
        HumanMessage("refund 40", id="h1").model_dump(),
        NoteMessage(content="kept for the auditors", id="n1").model_dump(),
        AIMessage(
            "", id="a1", tool_calls=[{"name": "refund", "args": {}, "id": "t1"}]
        ).model_dump(),
        ToolMessage("Refunded 40 EUR.", tool_call_id="t1", id="t2").model_dump(),
        AIMessage("Done: refunded.", id="a2").model_dump(),
    ]
    messages = messages_of(raw)
    assert [m.id for m in messages] == ["h1", "n1", "a1", "t2", "a2"]
    assert messages[1].content == "kept for the auditors"
    state = snapshot_of({"values": {"messages": raw}, "interrupts": [], "tasks": []})
    assert final_text(state.values) == "Done: refunded."
