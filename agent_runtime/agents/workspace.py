"""The folder the example tools act on; no path leaves it (``..``, absolute paths, links)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

SEED_FILES = {
    "reports/weekly.md": "# Weekly report\n\nRevenue: 1200\nIncidents: 0\n",
    "notes/old.txt": "Obsolete notes from last quarter.\n",
    "config/app.env": "FEATURE_FLAG=off\n",
}


class PathOutsideWorkspace(ValueError):
    """The agent asked for a path outside its workspace."""


class Workspace:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._effects_lock = threading.Lock()

    def ensure(self) -> Workspace:
        """Create the folder with a few example files, keeping whatever is already there."""
        self.root.mkdir(parents=True, exist_ok=True)
        for rel, text in SEED_FILES.items():
            target = self.root / rel
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        return self

    def resolve(self, path: str) -> Path:
        candidate = Path(path)
        if candidate.is_absolute():
            raise PathOutsideWorkspace(f"{path!r} is absolute; use a path inside the workspace")
        resolved = (self.root / candidate).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise PathOutsideWorkspace(f"{path!r} leaves the workspace")
        return resolved

    @property
    def effects_file(self) -> Path:
        return self.root / ".effects.jsonl"

    def record_effect(self, tool: str, **fields: Any) -> None:
        """Append one line per side effect, so operators (and tests) can count what really ran."""
        line = {"at": dt.datetime.now(dt.UTC).isoformat(), "tool": tool, **fields}
        with self._effects_lock, self.effects_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")

    def effects(self) -> list[dict[str, Any]]:
        if not self.effects_file.exists():
            return []
        lines = self.effects_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
