"""Block Kit payloads against the JSON kept under ``snapshots/``: ``UPDATE_SNAPSHOTS=1`` writes
them again (read the diff before committing it)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SNAPSHOTS = Path(__file__).parent / "snapshots"


def assert_matches_snapshot(payload: Any, name: str) -> None:
    path = SNAPSHOTS / f"{name}.json"
    rendered = json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        path.write_text(rendered, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path.name}; run with UPDATE_SNAPSHOTS=1"
    assert rendered == path.read_text(encoding="utf-8")
