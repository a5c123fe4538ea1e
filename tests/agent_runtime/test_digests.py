"""Digests in the engine: a lost post answer is found, not posted again and again; a redraw
lost to a failure is repaired; requests are packed so no message lists too many actions."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace

from sqlalchemy import select

from agent_runtime.authorization import Actor
from agent_runtime.digests import pack
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.notifier import MessageRef
from agent_runtime.policy import Digest, load_policy
from agent_runtime.recording import MAX_DIGEST_ACTIONS, digestible
from store.digests import DigestRepository
from store.display_models import DigestItem, DigestMessage
from store.models import Action, ApprovalRequest, utcnow
from tests.agent_runtime.engine_env import REQUESTER, REVIEWER, Recorder, decide, make_env

SEND = 'send_external_message {"recipient": "a@example.com", "text": "hi"}'


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


@dataclass
class DigestRecorder(Recorder):
    posts: list = field(default_factory=list)
    redraws: list = field(default_factory=list)
    lose_answers: int = 0
    """Posts whose answer is lost after the chat took them."""
    fail_redraws: int = 0
    visible: bool = True
    """Whether a post whose answer was lost can be found in the channel."""

    def digest_posted(self, digest):  # type: ignore[no-untyped-def]
        self.posts.append(digest)
        if self.lose_answers:
            self.lose_answers -= 1
            raise TimeoutError("the answer was lost")
        return MessageRef(digest.channel, f"{len(self.posts)}.5")

    def find_digest(self, digest):  # type: ignore[no-untyped-def]
        found = [i for i, d in enumerate(self.posts, 1) if d.id == digest.id]
        return MessageRef(digest.channel, f"{found[0]}.5") if found and self.visible else None

    def digest_updated(self, digest):  # type: ignore[no-untyped-def]
        if self.fail_redraws:
            self.fail_redraws -= 1
            raise ConnectionError("chat.update failed")
        self.redraws.append(digest)


def digest_env(tmp_path, clock, *, url=None, run=True):  # type: ignore[no-untyped-def]
    env = make_env(tmp_path, clock=clock, url=url)
    env.notes = DigestRecorder()
    send = env.policy.tools["send_external_message"]
    tools = {
        **env.policy.tools,
        "send_external_message": send.model_copy(update={"decisions": ("approve", "reject")}),
    }
    env.with_policy(digest=Digest(risks=("medium",), every=dt.timedelta(hours=1)), tools=tools)
    if run:
        started = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
        env.engine.execute_run(started.id)
    return env


def stored_digests(env) -> list[DigestMessage]:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        rows = list(s.scalars(select(DigestMessage)))
        s.expunge_all()
        return rows


def test_a_digested_request_gets_no_card_and_one_digest_when_due(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)
    assert env.notes.requested == [], "no card"
    assert env.engine.reconcile().cards_posted == 0, "and no card is retried for it"
    clock.now += dt.timedelta(minutes=59)
    assert env.engine.sweep().digests == 0
    clock.now += dt.timedelta(minutes=2)
    assert env.engine.sweep().digests == 1
    assert env.engine.sweep().digests == 0
    [posted] = env.notes.posts
    assert [a.actions[0].tool_name for a in posted.approvals] == ["send_external_message"]


def test_a_post_whose_answer_was_lost_is_found_once_the_lease_ran_out(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)
    env.notes.lose_answers = 1
    clock.now += dt.timedelta(hours=1, minutes=1)
    assert env.engine.sweep().digests == 0
    [digest] = stored_digests(env)
    assert digest.ts is None
    assert env.engine.reconcile().digests == 0, "the poster's lease still holds"
    clock.now += dt.timedelta(minutes=2)
    env.engine.reconcile()
    assert len(env.notes.posts) == 1, "found in the channel, not posted again"
    assert [d.ts for d in stored_digests(env)] == ["1.5"]
    for _ in range(3):
        clock.now += dt.timedelta(minutes=2)
        env.engine.reconcile()
    assert len(env.notes.posts) == 1


def test_a_lost_post_that_is_not_in_the_channel_is_posted_again_once(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)
    env.notes.lose_answers, env.notes.visible = 1, False
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    for _ in range(3):
        clock.now += dt.timedelta(minutes=2)
        env.engine.reconcile()
    assert len(env.notes.posts) == 2
    assert [d.ts for d in stored_digests(env)] == ["2.5"]


def test_a_failed_redraw_after_a_decision_is_repaired(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        action_id = request.actions[0].id
    env.notes.fail_redraws = 5  # every redraw of the decision and its resume fails
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    assert env.notes.redraws == []
    env.notes.fail_redraws = 0
    assert env.engine.reconcile().digests == 1
    [redrawn] = env.notes.redraws
    assert redrawn.approvals[0].status == "resolved"
    assert [d.settled for d in stored_digests(env)] == [True]
    assert env.engine.reconcile().digests == 0, "a settled digest is left alone"


def _request(rid: str, rows: int, *, exempt: int = 0):  # type: ignore[no-untyped-def]
    """A request with ``rows`` actions shown in a digest (open or decided) and ``exempt``
    actions that never are."""
    shown = [SimpleNamespace(outcome=None, exempt=False)] * rows
    return SimpleNamespace(
        id=rid, actions=shown + [SimpleNamespace(outcome=None, exempt=True)] * exempt
    )


def test_pack_never_puts_more_than_the_limit_of_actions_in_one_digest():
    requests = [_request(f"r{i}", n, exempt=3) for i, n in enumerate([5, 10, 6, 20, 1])]
    assert pack(requests, limit=20) == [["r0", "r1"], ["r2"], ["r3"], ["r4"]]  # type: ignore[arg-type]
    assert pack([], limit=20) == []


def test_a_decision_redraws_the_digest_at_once(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    [posted] = env.notes.posts
    action_id = posted.approvals[0].actions[0].id
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    assert [d.approvals[0].status for d in env.notes.redraws][-1] == "resolved"
    assert env.notes.requested == [] and env.notes.updated == [], "never drawn as a card"


def test_two_replicas_post_one_digest_listing_each_request_once(tmp_path, migrated_pg_url):
    clock = Clock()
    first = digest_env(tmp_path / "a", clock, url=migrated_pg_url)
    second = digest_env(tmp_path / "b", clock, url=migrated_pg_url, run=False)
    clock.now += dt.timedelta(hours=1, minutes=1)
    barrier = threading.Barrier(2)

    def sweep(env):  # type: ignore[no-untyped-def]
        barrier.wait()
        return env.engine.sweep().digests

    with ThreadPoolExecutor(2) as pool:
        counts = list(pool.map(sweep, [first, second]))
    assert sorted(counts) == [0, 1]
    assert len(first.notes.posts) + len(second.notes.posts) == 1
    with first.db.transaction() as s:
        assert len(list(s.scalars(select(DigestItem.request_id)))) == 1
    assert len(stored_digests(first)) == 1
    for env in (first, second):
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_requests_recorded_for_a_digest_are_listed_at_once_when_the_policy_drops_it(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)
    env.with_policy(digest=None)
    assert env.engine.sweep().digests == 1, "not left without a card or a digest"


def test_a_digest_posted_after_its_requests_closed_is_settled(tmp_path):
    """The post fails, the run is cancelled meanwhile, the retry posts the closed state: the
    message is right, but ``settled`` is never set, so ``open_posted`` (oldest first, limit
    100) returns it on every maintenance round forever, crowding out newer digests."""
    clock = Clock()
    env = digest_env(tmp_path, clock)
    env.notes.lose_answers, env.notes.visible = 1, False
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    [digest] = stored_digests(env)
    assert digest.ts is None
    with env.db.transaction() as s:
        run_id = s.scalars(select(ApprovalRequest.run_id)).one()
    assert env.engine.cancel_run(run_id, actor=REQUESTER).cancelled
    for _ in range(3):
        clock.now += dt.timedelta(minutes=2)
        env.engine.reconcile()
    assert [a.status for a in env.notes.posts[-1].approvals] == ["cancelled"]
    assert [d.ts for d in stored_digests(env)] == ["2.5"]
    with env.db.transaction() as s:
        assert DigestRepository(s).open_posted() == [], "a closed digest is still 'open'"


def test_one_digest_never_lists_requests_of_two_workspaces(tmp_path):
    clock = Clock()
    env = digest_env(tmp_path, clock)  # a run of T1 in C1
    other = Actor("U0BOB", "T2")
    started = env.engine.start_run(actor=other, channel_id="C1", text=SEND)
    env.engine.execute_run(started.id)
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    teams = [{a.run.requester_id for a in d.approvals} for d in env.notes.posts]
    with env.db.transaction() as s:
        by_team = {
            r[0]: r[1]
            for r in s.execute(select(ApprovalRequest.requester_id, ApprovalRequest.team_id))
        }
    assert by_team == {"U0ALICE": "T1", "U0BOB": "T2"}
    assert all(len({by_team[u] for u in users}) == 1 for users in teams), (
        f"one digest mixes workspaces: {teams}; stored {[d.team_id for d in stored_digests(env)]}"
    )


def test_stuck_unsettled_digests_starve_the_repair_of_newer_ones(tmp_path, monkeypatch):
    """Consequence of the above: ``open_posted`` returns the oldest N; with N stuck ones
    (N=1 here, 100 in production), a newer digest whose redraw failed is never repaired."""
    monkeypatch.setattr(DigestRepository.__init__, "__kwdefaults__", {"limit": 1})
    clock = Clock()
    env = digest_env(tmp_path, clock)
    env.notes.lose_answers, env.notes.visible = 1, False
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    with env.db.transaction() as s:
        run_id = s.scalars(select(ApprovalRequest.run_id)).one()
    env.engine.cancel_run(run_id, actor=REQUESTER)
    clock.now += dt.timedelta(minutes=2)
    env.engine.reconcile()  # posts the closed digest: never settled
    started = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    env.engine.execute_run(started.id)
    clock.now += dt.timedelta(hours=1, minutes=1)
    env.engine.sweep()
    newer = env.notes.posts[-1]
    action_id = newer.approvals[0].actions[0].id
    env.notes.fail_redraws = 5
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    env.notes.fail_redraws = 0
    for _ in range(3):
        clock.now += dt.timedelta(minutes=2)
        env.engine.reconcile()
    shown = [d for d in env.notes.redraws if d.id == newer.id]
    assert shown and shown[-1].approvals[0].status == "resolved", "newer digest never repaired"


def test_no_reminder_goes_out_for_a_digested_request_before_its_digest_exists(tmp_path):
    """A reminder of a request reviewed in a digest goes to the run's thread (``_card_place``
    with no card) and may come before the digest is posted: reviewers are pinged about an
    approval they can find nowhere."""
    clock = Clock()
    env = digest_env(tmp_path, clock, run=False)
    env.with_policy(
        defaults=env.policy.defaults.model_copy(update={"remind_after": dt.timedelta(minutes=30)})
    )
    started = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    env.engine.execute_run(started.id)
    clock.now += dt.timedelta(minutes=31)
    env.engine.sweep()
    assert env.notes.posts == [], "no digest yet (every = 1 h)"
    assert env.notes.reminded == [], "reminded of an approval that is not shown anywhere"


def test_a_request_with_more_rows_than_a_digest_holds_gets_a_card() -> None:
    """Decided (vetoed) actions are rows too: counting only the open ones let a request into a
    digest whose last open actions fell past the message's end, with no buttons anywhere."""
    policy = load_policy(None).model_copy(
        update={"digest": Digest(risks=("medium",), every=dt.timedelta(hours=1))}
    )
    tool = "a_tool_the_policy_does_not_name"  # medium risk, approve/reject, one sign-off
    both = ["approve", "reject"]
    vetoed = [
        Action(
            tool_name=tool,
            outcome="rejected",
            exempt=False,
            allowed_decisions=["approve", "reject"],
        )
        for _ in range(5)
    ]
    open_ = [
        Action(tool_name=tool, outcome=None, exempt=False, allowed_decisions=both)
        for _ in range(MAX_DIGEST_ACTIONS - 4)
    ]
    assert digestible(policy, open_)
    assert not digestible(policy, [*vetoed, *open_])


def test_a_digest_that_cannot_be_drawn_keeps_no_other_from_its_post_or_repair(
    tmp_path, monkeypatch
):
    """Drawing a digest reads the store and renders its requests; one that raises there (a
    row the view cannot take, the store failing for it) is logged and tried again on a later
    round. The other channels' digests are posted and repaired meanwhile."""
    from agent_runtime import digests

    clock = Clock()
    env = digest_env(tmp_path, clock)  # a run in C1
    other = env.engine.start_run(actor=REQUESTER, channel_id="C2", text=SEND)
    env.engine.execute_run(other.id)
    drawn = digests.approval_view
    broken = {"C1"}

    def view(request):  # type: ignore[no-untyped-def]
        if request.run.channel_id in broken:
            raise ValueError("this request cannot be drawn")
        return drawn(request)

    monkeypatch.setattr(digests, "approval_view", view)
    clock.now += dt.timedelta(hours=1, minutes=1)
    assert env.engine.sweep().digests == 1
    assert [d.channel for d in env.notes.posts] == ["C2"]

    clock.now += dt.timedelta(minutes=2)  # its lease ran out: its post is tried again
    env.engine.reconcile()  # and fails again, alone
    assert [d.channel for d in env.notes.posts] == ["C2"]
    broken.clear()  # C1's digest, listed but never posted, is posted once its lease ran out
    clock.now += dt.timedelta(minutes=2)
    env.engine.reconcile()
    assert sorted(d.channel for d in env.notes.posts) == ["C1", "C2"]

    with env.db.transaction() as s:
        action_ids = list(s.scalars(select(Action.id)))
    env.notes.fail_redraws = 10  # the decisions' redraws fail: both digests need a repair
    for action_id in action_ids:
        assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    env.notes.fail_redraws = 0
    broken.add("C1")
    env.engine.reconcile()
    assert [d.channel for d in env.notes.redraws] == ["C2"]
    broken.clear()
    env.engine.reconcile()
    assert [d.channel for d in env.notes.redraws] == ["C2", "C1"]
    assert [d.settled for d in stored_digests(env)] == [True, True]
