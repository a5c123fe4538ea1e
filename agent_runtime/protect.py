"""Protect any LangChain tool with the point-of-effect gate: ``gate_tools(gate, tools)``.

For tools you wrote yourself you may instead call ``gate.run(config, tool_name=..., args=...,
effect=...)`` around the side effect (what the bundled tools do). Either way the tool refuses
to act unless people approved exactly this call, however the agent that called it is wired.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, Tool
from pydantic import ConfigDict

from agent_runtime.gate import EffectGate, GateRefused, Grant
from agent_runtime.schemas import ToolSchema

T = TypeVar("T")


class GatedTool(BaseTool):
    """The wrapped tool's name, description and schema; its effect only through the gate."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseTool
    gate: EffectGate
    own_schema: ToolSchema

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        args, call_id = _call_parts(input)
        try:
            grant = self._authorize(config, args, call_id)
        except GateRefused as exc:
            return self._refused(exc, call_id)
        if grant is not None and grant.stored_result is not None:
            return self._message(grant.stored_result, call_id)
        try:
            with self._running(grant):
                output = self.inner.invoke(input, config, **kwargs)
        except Exception as exc:
            self._failed(grant, exc)
            raise
        except BaseException:
            self._abandoned(grant)
            raise
        self._finish(grant, output)
        return output

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """A tool with no coroutine of its own runs in a thread as a whole, the gate's
        bookkeeping with it: a cancel of the caller then neither stops the effect nor lets
        go of it while it runs. A coroutine's effect stops with a cancel: it is left cut
        short, for a replay."""
        if not _runs_async(self.inner):
            return await asyncio.to_thread(self.invoke, input, config, **kwargs)
        args, call_id = _call_parts(input)
        try:
            grant = await _settled(
                asyncio.to_thread(self._authorize, config, args, call_id), left=self._abandoned
            )
        except GateRefused as exc:
            return self._refused(exc, call_id)
        if grant is not None and grant.stored_result is not None:
            return self._message(grant.stored_result, call_id)
        try:
            with self._running(grant):
                output = await self.inner.ainvoke(input, config, **kwargs)
        except Exception as exc:
            await _settled(asyncio.to_thread(self._failed, grant, exc))
            raise
        except BaseException:  # cancelled, say: no thread hop, which would wait
            self._abandoned(grant)
            raise
        await _settled(asyncio.to_thread(self._finish, grant, output))
        return output

    def _authorize(
        self, config: RunnableConfig | None, args: Mapping[str, Any], call_id: str | None
    ) -> Grant | None:
        """Judged on what the model sent: values LangChain injects (state, store) are not
        part of the reviewed call."""
        sent = self.own_schema.without_injected(args)
        return self.gate.authorize(
            config, tool_name=self.name, args=sent, tool_call_id=call_id, schema=self.own_schema
        )

    def _running(self, grant: Grant | None) -> AbstractContextManager[None]:
        return nullcontext() if grant is None else self.gate.running(grant)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("GatedTool runs through invoke()")

    def _finish(self, grant: Grant | None, output: Any) -> None:
        if grant is not None:
            content = output.content if isinstance(output, ToolMessage) else output
            self.gate.finish(grant, str(content))

    def _failed(self, grant: Grant | None, exc: Exception) -> None:
        """The approval is spent either way: a retry of this call gets the failure back."""
        if grant is not None:
            self.gate.finish(grant, f"Failed: {type(exc).__name__}: {exc}")

    def _abandoned(self, grant: Grant | None) -> None:
        """Left with no result: cut short, for a replay (a kept result held nothing)."""
        if grant is not None and grant.stored_result is None:
            self.gate.abandon(grant)

    def _message(self, content: str, call_id: str | None) -> Any:
        if call_id is None:
            return content
        return ToolMessage(content=content, tool_call_id=call_id, name=self.name)

    def _refused(self, exc: GateRefused, call_id: str | None) -> Any:
        if call_id is None:
            raise exc
        return ToolMessage(content=str(exc), tool_call_id=call_id, name=self.name, status="error")


def gate_tool(gate: EffectGate, tool: BaseTool) -> BaseTool:
    """The tool, refusing to act without a matching approval; its schema joins the catalog."""
    gate.catalog.add(tool)
    return GatedTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        extras=tool.extras,
        inner=tool,
        gate=gate,
        own_schema=ToolSchema.of(tool),
    )


def gate_tools(gate: EffectGate, tools: Iterable[BaseTool]) -> list[BaseTool]:
    return [gate_tool(gate, tool) for tool in tools]


def _runs_async(tool: BaseTool) -> bool:
    """Whether the tool has a coroutine of its own (else LangChain runs it in a thread)."""
    if getattr(tool, "coroutine", None) is not None:
        return True
    if isinstance(tool, (StructuredTool, Tool)):
        return False
    return type(tool)._arun is not BaseTool._arun


async def _settled(step: Coroutine[Any, Any, T], *, left: Callable[[T], None] | None = None) -> T:
    """Await ``step`` (a thread hop of the gate's bookkeeping). A cancel of the caller does
    not stop it: a result it keeps is kept, and what it returns is handed to ``left``."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if left is not None:
            task.add_done_callback(lambda done: _hand(done, left))
        raise


def _hand(done: asyncio.Future[T], left: Callable[[T], None]) -> None:
    if not done.cancelled() and done.exception() is None:
        left(done.result())


def _call_parts(input: Any) -> tuple[Mapping[str, Any], str | None]:
    """A ToolCall (``{"name", "args", "id", "type": "tool_call"}``) or plain named arguments.
    Anything else (a bare string, which LangChain maps onto a single argument) is refused:
    the gate must judge exactly the arguments the tool will run with."""
    if isinstance(input, Mapping) and input.get("type") == "tool_call":
        args = input.get("args")
        if not isinstance(args, Mapping):
            raise GateRefused("Refused: the call carries no named arguments; nothing ran.")
        return args, input.get("id")
    if isinstance(input, Mapping):
        return input, None
    raise GateRefused("Refused: call gated tools with named arguments; nothing ran.")
