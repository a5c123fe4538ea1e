"""A LangGraph Server thread's state, read as the engine reads a local one.

The server answers with JSON: messages as dicts, interrupts as ``{"id", "value"}``. They become
the shapes ``agent_runtime.wire`` reads (LangChain message objects, ``Interrupt``, a
``StateSnapshot``), so the engine checks a remote thread with the very code it checks a local
one with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ChatMessage, messages_from_dict
from langchain_core.runnables import RunnableConfig
from langgraph.types import Interrupt, PregelTask, StateSnapshot

from agent_runtime.call_identity import RUN_CONFIG_KEY

NO_THREAD = StateSnapshot(
    values={},
    next=(),
    config=RunnableConfig(configurable={}),
    metadata=None,
    created_at=None,
    parent_config=None,
    tasks=(),
    interrupts=(),
)


def run_config(run_id: str, *, recursion_limit: int) -> dict[str, Any]:
    """What every server run of ours carries: the bot's run id, which the point-of-effect gate
    on the server reads to find the approvals of this run."""
    return {"configurable": {RUN_CONFIG_KEY: run_id}, "recursion_limit": recursion_limit}


def messages_of(raw: Sequence[Any]) -> list[BaseMessage]:
    """Server messages (``model_dump`` dicts with their ``type``) as LangChain messages. A
    type LangChain cannot rebuild (a graph's own message class) is kept as a ``ChatMessage``
    with that role: it must not make the thread unreadable, and so never resumable."""
    out: list[BaseMessage] = []
    for item in raw:
        if isinstance(item, BaseMessage):
            out.append(item)
        elif isinstance(item, Mapping) and "type" in item:
            try:
                out.extend(messages_from_dict([{"type": item["type"], "data": dict(item)}]))
            except ValueError:  # pydantic's ValidationError is one too
                out.append(_as_chat(item))
    return out


def _as_chat(item: Mapping[str, Any]) -> ChatMessage:
    content = item.get("content")
    return ChatMessage(
        content=content if isinstance(content, (str, list)) else str(content),
        role=str(item["type"]),
        id=item.get("id") if isinstance(item.get("id"), str) else None,
    )


def values_of(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        return {}
    values = dict(raw)
    if isinstance(values.get("messages"), list):
        values["messages"] = messages_of(values["messages"])
    return values


def interrupts_of(raw: Sequence[Mapping[str, Any]] | None) -> tuple[Interrupt, ...]:
    return tuple(Interrupt(value=item.get("value"), id=str(item["id"])) for item in raw or ())


def snapshot_of(state: Mapping[str, Any]) -> StateSnapshot:
    """The server's ``ThreadState`` as a ``StateSnapshot``. Interrupts are the thread's own
    list (those raised inside subgraphs included, as the server's ``get_state`` gathers
    them); failing that, the tasks'."""
    tasks = tuple(_task_of(task) for task in state.get("tasks") or ())
    interrupts = (
        interrupts_of(state["interrupts"])
        if state.get("interrupts") is not None
        else tuple(i for task in tasks for i in task.interrupts)
    )
    checkpoint = state.get("checkpoint") or {}
    return StateSnapshot(
        values=values_of(state.get("values")),
        next=tuple(state.get("next") or ()),
        config=RunnableConfig(configurable=dict(checkpoint)),
        metadata=state.get("metadata"),
        created_at=state.get("created_at"),
        parent_config=None,
        tasks=tasks,
        interrupts=interrupts,
    )


def _task_of(task: Mapping[str, Any]) -> PregelTask:
    return PregelTask(
        id=str(task.get("id")),
        name=str(task.get("name")),
        path=(),
        error=Exception(task["error"]) if task.get("error") else None,
        interrupts=interrupts_of(task.get("interrupts")),
        state=None,
        result=task.get("result"),
    )
