"""Who has opened the Home tab: read once per freshness window however many cards change,
and a viewer remembered by this process is known at once."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event

from agent_runtime.authorization import Actor
from agent_runtime.listing import PendingList
from agent_runtime.overview import VIEWERS_FRESH_SECONDS, Overview
from agent_runtime.policy import load_policy
from tests.agent_runtime.rows import sqlite_store


def test_viewers_are_read_once_per_window_and_a_new_viewer_is_known_at_once(
    tmp_path: Path,
) -> None:
    db = sqlite_store(tmp_path)
    policy = load_policy(None)
    now = [0.0]
    pending = PendingList(db=db, policy=policy, usergroup_members=lambda _g: frozenset())
    overview = Overview(db=db, policy=policy, pending=pending, clock=lambda: now[0])
    reads: list[str] = []
    event.listen(
        db.engine,
        "before_cursor_execute",
        # The list of viewers (remembering one reads its own row by key: not counted).
        lambda *a: (
            reads.append(a[2]) if "FROM home_viewers" in a[2] and "WHERE" not in a[2] else None
        ),
    )
    assert overview.viewers_among({"U0REL1"}, limit=10) == []
    overview.remember_viewer(Actor("U0REL1", "T1"))
    for _ in range(5):  # five card changes
        assert overview.viewers_among({"U0REL1", "U0ALICE"}, limit=10) == [Actor("U0REL1", "T1")]
        assert overview.other_viewers({"U0ALICE"}) and not overview.other_viewers({"U0REL1"})
    assert len(reads) == 1

    other = Overview(db=db, policy=policy, pending=pending, clock=lambda: now[0])
    assert other.viewers_among({"U0REL1"}, limit=10) == [Actor("U0REL1", "T1")]  # from the table
    now[0] += VIEWERS_FRESH_SECONDS
    overview.viewers_among({"U0REL1"}, limit=10)
    assert len(reads) == 3  # the other replica's read, then this one's once the window ended
