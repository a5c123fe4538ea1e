"""Every tool the bot can see, by name: the one place argument schemas are looked up.

Cards, ``when`` conditions, action hashes, edit validation and the point-of-effect gate all
normalize arguments here, so a default or a coercion cannot change a verdict between them.
"""

from __future__ import annotations

import enum
import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from agent_runtime.schemas import InvalidArguments, ToolSchema


class ArgsState(enum.StrEnum):
    """How far arguments could be checked: against the tool's schema (valid or not), or not at
    all (a tool we cannot see, or two tools sharing a name). Only valid ones can be exempt."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ToolVersions:
    """What a reviewed call ran against, besides its arguments: the tool's declared version
    (``metadata={"version": ...}`` on the tool) and a digest of its argument schema."""

    tool: str | None = None
    schema: str | None = None


VERSION_KEY = "version"


class ToolCatalog:
    def __init__(self, tools: Iterable[BaseTool] = ()) -> None:
        self._schemas: dict[str, ToolSchema] = {}
        self._declared: dict[str, str] = {}
        self._digests: dict[str, str] = {}
        self._ambiguous: set[str] = set()
        self._lock = threading.Lock()
        for tool in tools:
            self.add(tool)

    def add(self, tool: BaseTool) -> None:
        """Two different schemas under one name (a parent's and a subagent's tool, say) cannot
        be told apart by name: such calls are never normalized, so never exempt (fail closed)."""
        schema = ToolSchema.of(tool)
        declared = (tool.metadata or {}).get(VERSION_KEY)
        with self._lock:
            known = self._schemas.setdefault(tool.name, schema)
            if known is not schema and known.json_schema() != schema.json_schema():
                self._ambiguous.add(tool.name)
            if declared is not None:
                self._declared.setdefault(tool.name, str(declared)[:64])

    def versions(self, name: str) -> ToolVersions:
        """A tool we cannot see, or two sharing a name, has no schema version. The digest is
        computed once per tool: this is asked at every grant and every resume."""
        known = self._schemas.get(name)
        digest = None
        if known is not None and name not in self._ambiguous:
            digest = self._digests.get(name)
            if digest is None:
                canonical = json.dumps(known.json_schema(), sort_keys=True, separators=(",", ":"))
                digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
                self._digests[name] = digest
        return ToolVersions(tool=self._declared.get(name), schema=digest)

    def add_graph(self, graph: Any) -> None:
        """Tools of every node that carries them (``ToolNode`` and the like), not only a node
        named ``tools``: an agent may be wired any way."""
        for node in getattr(graph, "nodes", {}).values():
            bound = getattr(node, "bound", node)
            for tool in (getattr(bound, "tools_by_name", None) or {}).values():
                if isinstance(tool, BaseTool):
                    self.add(tool)

    def schema(self, name: str, current: Mapping[str, Any]) -> ToolSchema:
        """The tool's schema; for a tool we cannot see, one made of the current keys."""
        known = self._schemas.get(name)
        return known if known is not None else ToolSchema.from_keys(current)

    def normalize(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments as the tool will see them; raises ``InvalidArguments`` when they are not
        valid for it. A tool we cannot see gets its arguments as given."""
        known = self._schemas.get(name)
        return known.normalize(args) if known is not None else dict(args)

    def normalize_or_raw(
        self, name: str, args: Mapping[str, Any]
    ) -> tuple[dict[str, Any], ArgsState]:
        """Normalized arguments when the tool's schema accepts them, else as given; and how far
        they could be checked."""
        known = self._schemas.get(name)
        if known is None or name in self._ambiguous:
            return dict(args), ArgsState.UNKNOWN
        try:
            return known.normalize(args), ArgsState.VALID
        except InvalidArguments:
            return dict(args), ArgsState.INVALID

    def errors(self, name: str, args: Mapping[str, Any]) -> dict[str, str]:
        known = self._schemas.get(name)
        return known.errors(args) if known is not None else {}
