"""The pending list's plain records show exactly what the stored models show: the same views
for the same requests (edited actions, decisions out of insertion order, JSON, several
actions), on both backends."""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_runtime.views import ApprovalView, approval_view
from store.db import Database
from store.migrate import upgrade
from store.models import Action, ApprovalRequest, Decision, Run, new_id, utcnow
from store.pending_reads import pending_records
from store.repositories import ApprovalRepository

RM, SECURITY = "release-managers", "security"
ALICE, REL, REL2, READER = "U0ALICE", "U0REL1", "U0REL2", "U0REL9"
ORIGINAL, EDITED = "h" * 64, "e" * 64
NOW = utcnow()


def _action(position: int, roles: list[str], **fields: Any) -> Action:
    values: dict[str, Any] = {
        "id": new_id("act"),
        "position": position,
        "tool_name": "publish_report",
        "args": {"path": "r.md"},
        "allowed_decisions": ["approve", "edit", "reject"],
        "approver_roles": roles,
        "approvals_required": 2,
        "action_hash": ORIGINAL,
        "operation_id": new_id("op"),
    }
    values.update(fields)
    return Action(**values)


def _request(db: Database, actions: list[Action], *, minutes_ago: int) -> str:
    """A pending request of ALICE's; its actions stored in the order given."""
    with db.transaction() as s:
        run = Run(
            id=new_id("run"),
            team_id="T1",
            requester_id=ALICE,
            channel_id="C1",
            thread_ts="1700000000.000100",
            request_text="publish the notes",
        )
        s.add(run)
        request = ApprovalRequest(
            id=new_id("apr"),
            run_id=run.id,
            interrupt_id=new_id("i"),
            kind="hitl_batch",
            policy_version="v1",
            environment="production",
            requester_id=ALICE,
            expires_at=NOW + dt.timedelta(hours=1),
            created_at=NOW - dt.timedelta(minutes=minutes_ago),
            card_channel="C2",
            card_ts="1700000000.000200",
            review_channel="C2",
        )
        ApprovalRepository(s).add(request, actions)
        return request.id


def _decide(db: Database, action: Action, *decisions: tuple[str, str, str, int]) -> None:
    """(reviewer, type, hash, seconds after NOW) each, stored one by one in the order given."""
    for reviewer, type_, hash_, seconds in decisions:
        with db.transaction() as s:
            s.add(
                Decision(
                    id=new_id("dec"),
                    action_id=action.id,
                    request_id=action.request_id,
                    reviewer_id=reviewer,
                    type=type_,
                    message=f"{type_} by {reviewer}",
                    action_hash=hash_,
                    created_at=NOW + dt.timedelta(seconds=seconds),
                )
            )


def _world(db: Database) -> tuple[str, str]:
    """Two listed requests: the older with an edited action (decided before and after the
    edit) and an undecided one, stored out of position order; the newer with one action."""
    edited = _action(
        0,
        [RM],
        args={"path": "r.md", "options": {"sections": [1, 2], "draft": False}, "note": None},
        edited_args={"path": "final.md", "options": {"sections": [3]}},
        extra={"recorded": {"tool": "v2"}},
        tool_call_id="call_1",
        tool_version="v2",
        description="Publish the report",
        risk="high",
    )
    undecided = _action(1, [RM, SECURITY], args={}, allowed_decisions=["approve", "reject"])
    older = _request(db, [undecided, edited], minutes_ago=2)
    with db.transaction() as s:
        stored = s.get(Action, edited.id)
        assert stored is not None
        stored.current_hash = EDITED
    # Stored newest first: insertion order is not the order they were given in.
    _decide(
        db,
        edited,
        (REL2, "approve", EDITED, 30),
        ("U0EDITOR", "edit", EDITED, 20),
        (REL, "approve", ORIGINAL, 10),
    )
    newer_action = _action(0, [RM], exempt=True, approvals_required=1, extra=None)
    newer = _request(db, [newer_action], minutes_ago=1)
    _decide(db, newer_action, (REL, "reject", ORIGINAL, 40))
    return older, newer


def _record_views(db: Database, **kwargs: Any) -> list[ApprovalView]:
    with db.transaction() as s:
        return [approval_view(r) for r in pending_records(s, **kwargs)]


def _orm_views(db: Database, ids: list[str]) -> list[ApprovalView]:
    with db.transaction() as s:
        loaded = [ApprovalRepository(s).get(i) for i in ids]
        return [approval_view(r) for r in loaded if r is not None]


def test_records_show_what_the_models_show(store_url: str) -> None:
    db = Database(store_url)
    upgrade(db.engine)
    older, newer = _world(db)

    views = _record_views(db, reviewer=READER, roles=[RM], limit=10)
    assert [v.id for v in views] == [older, newer]
    assert views == _orm_views(db, [older, newer])

    edited, undecided = views[0].actions
    assert [a.position for a in views[0].actions] == [0, 1]
    assert edited.action_hash == EDITED and undecided.action_hash == ORIGINAL
    assert [d.reviewer_id for d in edited.decisions] == [REL, "U0EDITOR", REL2]  # oldest first
    assert edited.approvers == ("U0EDITOR", REL2)  # REL approved the version before the edit
    assert edited.args["options"] == {"sections": [1, 2], "draft": False}
    assert edited.edited_args == {"path": "final.md", "options": {"sections": [3]}}
    assert undecided.decisions == () and undecided.args == {}
    assert views[0].run.thread_ts == "1700000000.000100" and views[0].environment == "production"
    db.dispose()


def test_records_page_as_the_list_does(store_url: str) -> None:
    """The slots' selection and order: a limit, a page after a request, an approver's own
    approval of the current version, and another reviewer's roles."""
    db = Database(store_url)
    upgrade(db.engine)
    older, newer = _world(db)

    assert [v.id for v in _record_views(db, reviewer=READER, roles=[RM], limit=1)] == [older]
    after = _record_views(db, reviewer=READER, roles=[RM], limit=5, after=older)
    assert after == _orm_views(db, [newer])
    # REL2 approved the edited action, but the undecided one still waits on release managers.
    assert [v.id for v in _record_views(db, reviewer=REL2, roles=[RM], limit=5)] == [older, newer]
    assert [v.id for v in _record_views(db, reviewer="U0SEC1", roles=[SECURITY], limit=5)] == [
        older
    ]
    assert _record_views(db, reviewer=ALICE, roles=[RM], limit=5) == []  # not on her own
    db.dispose()
