from __future__ import annotations

import pytest

from agent_runtime.agents.workspace import PathOutsideWorkspace, Workspace


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "notes/../../x", "link/secret"])
def test_paths_cannot_leave_the_workspace(tmp_path, path):
    ws = Workspace(tmp_path / "ws").ensure()
    (ws.root / "link").symlink_to(tmp_path)
    with pytest.raises(PathOutsideWorkspace):
        ws.resolve(path)


def test_paths_inside_resolve_and_effects_are_recorded(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    assert ws.resolve("notes/old.txt").read_text().startswith("Obsolete")
    ws.record_effect("t", a=1)
    assert [(e["tool"], e["a"]) for e in ws.effects()] == [("t", 1)]
