"""Digests in the engine: a lost post answer is found, not posted again and again; a redraw
lost to a failure is repaired; requests are packed so no message lists too many actions."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace

from sqlalchemy import select

from agent_runtime.digests import pack
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.notifier import MessageRef
from agent_runtime.policy import Digest
from store.models import ApprovalRequest, DigestItem, DigestMessage, utcnow
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


def _request(rid: str, open_actions: int):  # type: ignore[no-untyped-def]
    return SimpleNamespace(id=rid, actions=[SimpleNamespace(outcome=None)] * open_actions)


def test_pack_never_puts_more_than_the_limit_of_actions_in_one_digest():
    requests = [_request(f"r{i}", n) for i, n in enumerate([5, 10, 6, 20, 1])]
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


def test_two_replicas_post_one_digest_listing_each_request_once(tmp_path, pg_url):
    clock = Clock()
    first = digest_env(tmp_path / "a", clock, url=pg_url)
    second = digest_env(tmp_path / "b", clock, url=pg_url, run=False)
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
