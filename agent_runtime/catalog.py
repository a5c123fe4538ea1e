"""Every tool the bot can see, by name: the one place argument schemas are looked up.

Cards, ``when`` conditions, action hashes, edit validation and the point-of-effect gate all
normalize arguments here, so a default or a coercion cannot change a verdict between them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool

from agent_runtime.schemas import InvalidArguments, ToolSchema


class ToolCatalog:
    def __init__(self, tools: Iterable[BaseTool] = ()) -> None:
        self._schemas: dict[str, ToolSchema] = {}
        self._lock = threading.Lock()
        for tool in tools:
            self.add(tool)

    def add(self, tool: BaseTool) -> None:
        schema = ToolSchema.of(tool)
        with self._lock:
            self._schemas.setdefault(tool.name, schema)

    def add_graph(self, graph: Any) -> None:
        """Tools of every node that carries them (``ToolNode`` and the like), not only a node
        named ``tools``: an agent may be wired any way."""
        for node in getattr(graph, "nodes", {}).values():
            bound = getattr(node, "bound", node)
            for tool in (getattr(bound, "tools_by_name", None) or {}).values():
                if isinstance(tool, BaseTool):
                    self.add(tool)

    def knows(self, name: str) -> bool:
        return name in self._schemas

    def schema(self, name: str, current: Mapping[str, Any]) -> ToolSchema:
        """The tool's schema; for a tool we cannot see, one made of the current keys."""
        known = self._schemas.get(name)
        return known if known is not None else ToolSchema.from_keys(current)

    def normalize(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments as the tool will see them; raises ``InvalidArguments`` when they are not
        valid for it. A tool we cannot see gets its arguments as given."""
        known = self._schemas.get(name)
        return known.normalize(args) if known is not None else dict(args)

    def normalize_or_raw(self, name: str, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """``(arguments, valid)``: normalized when valid, else as given (and flagged)."""
        try:
            return self.normalize(name, args), True
        except InvalidArguments:
            return dict(args), False

    def errors(self, name: str, args: Mapping[str, Any]) -> dict[str, str]:
        known = self._schemas.get(name)
        return known.errors(args) if known is not None else {}
