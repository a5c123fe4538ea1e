"""A reviewer's pending list against the exact eligibility rules applied to every request:
requester, approvals given, decided actions, expiry and user-group membership, both backends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_runtime.authorization import ActionFacts, Actor, is_eligible
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.views import approval_view
from store.models import ApprovalRequest, utcnow
from store.statuses import RequestStatus
from tests.agent_runtime.engine_env import REQUESTER, REVIEWER, Env, decide, make_env, paused_run

PUBLISH = 'publish_report {"path": "notes.md"}'  # release managers, two approvals
DELETE = 'delete_project_file {"path": "old.md"}'  # release managers or security
ASK = 'ask_user {"question": "Which version?"}'  # the requester answers
GROUPIE = Actor("U0GROUPIE", "T1")  # a release manager through the S0RELMGR user group
READERS = [REVIEWER, Actor("U0REL2", "T1"), Actor("U0SEC1", "T1"), REQUESTER, GROUPIE]


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


def _groups(group: str) -> frozenset[str]:
    return frozenset({GROUPIE.user_id}) if group == "S0RELMGR" else frozenset()


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Env, Clock]]:
    url = None if request.param == "sqlite" else request.getfixturevalue("migrated_pg_url")
    clock = Clock()
    env = make_env(tmp_path, url=url, clock=clock, usergroup_members=_groups)
    yield env, clock
    close_checkpointer(env.runtime.checkpointer)
    env.db.dispose()


def _exact(env: Env, actor: Actor) -> list[str]:
    """Every request, checked one by one with the rules a click is checked with."""
    with env.db.transaction() as s:
        views = [(r.created_at, approval_view(r)) for r in s.scalars(select(ApprovalRequest))]
    mine = []
    for created_at, view in views:
        for a in view.actions:
            facts = ActionFacts(
                request_status=view.status,
                team_id=None,
                requester_id=view.requester_id,
                expires_at=view.expires_at,
                outcome=a.outcome,
                allowed_decisions=a.allowed_decisions,
                approver_roles=a.approver_roles,
                self_approval=False,
                approvers_so_far=frozenset(a.approvers),
            )
            refusal = is_eligible(
                env.policy,
                facts,
                actor.user_id,
                usergroup_members=_groups,
            )
            still_open = view.status == RequestStatus.PENDING and a.outcome is None
            if still_open and refusal is None and actor.user_id not in a.approvers:
                mine.append((created_at, view.id))  # oldest first
                break
    return [rid for _, rid in sorted(mine)]


def _agree(env: Env) -> dict[str, list[str]]:
    seen = {}
    for actor in READERS:
        exact = _exact(env, actor)
        assert [v.id for v in env.engine.pending_for(actor)] == exact, actor
        for limit in range(1, len(exact)):  # a short page is the same prefix
            assert [v.id for v in env.engine.pending_for(actor, limit=limit)] == exact[:limit]
        seen[actor.user_id] = exact
    return seen


def _request_of(env: Env, action_id: str) -> str:
    view = env.engine.approval_of_action(action_id)
    assert view is not None
    return view.id


def test_pending_lists_agree_with_the_exact_rules(world: tuple[Env, Clock]) -> None:
    env, clock = world
    stale = _request_of(env, paused_run(env, DELETE)[1])  # expires first
    clock.now += dt.timedelta(hours=3)
    run = env.engine.start_run(actor=REVIEWER, channel_id="C1", text=PUBLISH)
    env.engine.execute_run(run.id)  # the reviewer's own run: not theirs to approve
    own = env.notes.requested[-1].id
    clock.now += dt.timedelta(seconds=1)
    published = paused_run(env, PUBLISH)[1]
    question = _request_of(env, paused_run(env, ASK)[1])
    deleted = paused_run(env, DELETE)[1]
    seen = _agree(env)
    assert seen[GROUPIE.user_id][:2] == [stale, own]
    assert own not in seen[REVIEWER.user_id] and seen[REQUESTER.user_id] == [question]

    assert decide(env, action_id=published, actor=REVIEWER, decision="approve").refusal is None
    rejected = decide(
        env, action_id=deleted, actor=Actor("U0SEC1", "T1"), decision="reject", message="no"
    )
    assert rejected.refusal is None and rejected.completed
    seen = _agree(env)
    assert _request_of(env, published) not in seen[REVIEWER.user_id]
    assert _request_of(env, published) in seen[GROUPIE.user_id]
    assert _request_of(env, deleted) not in seen["U0SEC1"]

    clock.now += dt.timedelta(hours=1, seconds=1)
    assert env.engine.sweep().expired == 1
    seen = _agree(env)
    assert stale not in seen[GROUPIE.user_id] and stale not in seen["U0SEC1"]


def test_pages_walk_the_list_oldest_first_and_leave_out_what_expired(
    world: tuple[Env, Clock],
) -> None:
    """Pages of one partition the list; a request past its expiry that the sweeper has not
    closed yet is refused by the decision path, so it is not offered either."""
    env, clock = world
    old = _request_of(env, paused_run(env, DELETE)[1])  # expires after 4h
    clock.now += dt.timedelta(hours=2)
    newer = []
    for _ in range(3):
        clock.now += dt.timedelta(seconds=1)  # the engine dates requests by its clock
        newer.append(_request_of(env, paused_run(env, DELETE)[1]))
    overview = env.engine.overview
    pages, after = [], None
    while True:
        page = overview.waiting(REVIEWER, size=2, after=after)
        pages.append([v.id for v in page.items])
        if page.next_after is None:
            break
        after = page.next_after
    assert pages == [[old, newer[0]], [newer[1], newer[2]]]

    clock.now += dt.timedelta(hours=2, seconds=1)  # ``old`` is past its expiry, not swept
    assert [v.id for v in overview.waiting(REVIEWER, size=10).items] == newer
    assert overview.waiting(REVIEWER, size=2, after=newer[1]).items[0].id == newer[2]
    assert overview.waiting(Actor("U0MALLORY", "T1"), size=10).items == []
