"""The façade is the only orchestrator: with every owner replaced by a fake, it resumes what a
decision, an expiry or a take-over claimed, tells the thread of a run a resume ended, and records
where each resume stopped, again and again, without any owner calling another back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.catalog import ToolCatalog
from agent_runtime.decisions import DecisionResult
from agent_runtime.engine import ApprovalEngine
from agent_runtime.notifier import NullNotifier
from agent_runtime.policy import load_policy
from agent_runtime.resume import NOTHING, Resumed
from agent_runtime.views import approval_view
from store.repositories import ApprovalRepository
from tests.agent_runtime.rows import Seeded, seed_request, sqlite_store

REVIEWER = Actor("U0REL1", "T1")


@dataclass
class FakeResumer:
    outcomes: dict[str, Resumed]
    resumed: list[tuple[str, bool]] = field(default_factory=list)
    invalidated: list[str] = field(default_factory=list)

    unchanged: list[str] = field(default_factory=list)

    def resume(
        self,
        request_id: str,
        *,
        recovering: bool = False,
        claimed: object = None,
        unchanged: bool = False,
    ) -> Resumed:
        self.resumed.append((request_id, recovering))
        if unchanged:
            self.unchanged.append(request_id)
        return self.outcomes.get(request_id, NOTHING)

    def invalidate(self, request_id: str, *, reason: str) -> None:
        self.invalidated.append(request_id)


@dataclass
class FakeRuns:
    next_requests: list[list[str]] = field(default_factory=list)
    stops: list[Any] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def record_stop(self, run_id: str, state: Any = None) -> list[str]:
        self.stops.append(state)
        return self.next_requests.pop(0) if self.next_requests else []

    def fail(self, run_id: str, reason: str) -> None:
        self.failed.append((run_id, reason))


@dataclass
class FakeAnnouncer:
    shown: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    def run_finished(self, run: Any) -> None:
        self.finished.append(run.id)

    def show_card(self, view: Any) -> None:
        self.shown.append(view.id)

    def show_cards(self, views: Any) -> None:
        self.shown.extend(view.id for view in views)

    @contextmanager
    def showing_card(self, view: Any, *, after: float = 0.0) -> Iterator[None]:
        self.shown.append(view.id)
        yield

    def retry_card_posts(self, *, created_before: Any) -> int:
        return 0

    def repair_cards(self) -> int:
        return 0

    def post_missing_results(self, *, settled_before: Any) -> int:
        return 0

    def post_digests(self) -> int:
        return 0

    def repair_digests(self) -> int:
        return 0


def engine_with_fakes(tmp_path, outcomes):  # type: ignore[no-untyped-def]
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    runtime = SimpleNamespace(catalog=ToolCatalog())
    engine = ApprovalEngine(
        db=db,
        runtime=runtime,  # type: ignore[arg-type]
        policy=load_policy(None),
        notifier=NullNotifier(),
    )
    engine.resumer = FakeResumer(outcomes)  # type: ignore[assignment]
    engine.runs = FakeRuns()  # type: ignore[assignment]
    engine.announcer = FakeAnnouncer()  # type: ignore[assignment]
    return engine, seeded


def view_of(engine: ApprovalEngine, seeded: Seeded):  # type: ignore[no-untyped-def]
    with engine.db.transaction() as s:
        return approval_view(ApprovalRepository(s).get(seeded.request_id))


def decided(engine: ApprovalEngine, result: DecisionResult) -> None:
    engine.decisions = SimpleNamespace(record=lambda **_: result)  # type: ignore[assignment]
    engine.decide(action_id="act_x", actor=REVIEWER, decision="approve", seen_hash="h")


def test_the_last_decision_resumes_and_each_stop_is_recorded(tmp_path):
    after, later = object(), object()
    engine, seeded = engine_with_fakes(tmp_path, {})
    second = seed_request(engine.db)
    engine.resumer.outcomes = {  # type: ignore[attr-defined]
        seeded.request_id: Resumed(after=after),
        second.request_id: Resumed(after=later),
    }
    engine.runs.next_requests = [[second.request_id]]  # type: ignore[attr-defined]
    view = view_of(engine, seeded)
    decided(engine, DecisionResult(refusal=None, approval=view, completed=True))
    assert engine.announcer.shown == [seeded.request_id]  # type: ignore[attr-defined]
    assert engine.resumer.resumed == [  # type: ignore[attr-defined]
        (seeded.request_id, False),
        (second.request_id, False),
    ], "a stop that needs no one is resumed at once"
    assert engine.runs.stops == [after, later]  # type: ignore[attr-defined]


def test_a_decision_that_took_its_runs_lock_resumes_under_it_as_claimed(tmp_path):
    """The decision's ``hold_run`` took the run's lock before its commit: the resume goes on
    under that lock (the engine takes no other, which would wait for this one) and the claim
    is not looked at again; a decision that did not take it leaves the look to the resumer."""
    engine, seeded = engine_with_fakes(tmp_path, {})
    view = view_of(engine, seeded)
    taken: list[str] = []
    hold = engine.locks.hold

    def watched_hold(key: str):  # type: ignore[no-untyped-def]
        taken.append(key)
        return hold(key)

    engine.locks.hold = watched_hold  # type: ignore[method-assign]
    decided(engine, DecisionResult(refusal=None, approval=view, completed=True, run_held=True))
    assert engine.resumer.unchanged == [seeded.request_id]  # type: ignore[attr-defined]
    assert taken == []
    decided(engine, DecisionResult(refusal=None, approval=view, completed=True))
    assert engine.resumer.unchanged == [seeded.request_id]  # type: ignore[attr-defined]
    assert taken == [view.run.id]


def test_a_decision_that_completes_nothing_resumes_nothing(tmp_path):
    engine, seeded = engine_with_fakes(tmp_path, {})
    decided(engine, DecisionResult(refusal=None, approval=view_of(engine, seeded)))
    assert engine.resumer.resumed == []  # type: ignore[attr-defined]
    assert engine.announcer.shown == [seeded.request_id]  # type: ignore[attr-defined]


def test_a_resume_that_ended_its_run_has_its_thread_told_and_records_no_stop(tmp_path):
    """The resume wrote the run's end with the request's (failed here): nothing is left to
    record, nor to fail again; the thread is told."""
    engine, seeded = engine_with_fakes(tmp_path, {})
    view = view_of(engine, seeded)
    ended = Resumed(ended=view.run, run_failed="boom")
    engine.resumer.outcomes = {seeded.request_id: ended}  # type: ignore[attr-defined]
    decided(engine, DecisionResult(refusal=None, approval=view, completed=True))
    assert engine.announcer.finished == [seeded.run_id]  # type: ignore[attr-defined]
    assert engine.runs.failed == []  # type: ignore[attr-defined]
    assert engine.runs.stops == []  # type: ignore[attr-defined]


def test_a_decision_refused_for_a_changed_policy_closes_the_request(tmp_path):
    engine, seeded = engine_with_fakes(tmp_path, {})
    current = view_of(engine, seeded)
    decided(engine, DecisionResult(refusal=Refusal.POLICY_CHANGED, current=current))
    assert engine.resumer.invalidated == [seeded.request_id]  # type: ignore[attr-defined]
    assert engine.resumer.resumed == []  # type: ignore[attr-defined]


def test_a_stale_click_redraws_the_card(tmp_path):
    engine, seeded = engine_with_fakes(tmp_path, {})
    decided(engine, DecisionResult(refusal=Refusal.STALE_VERSION, current=view_of(engine, seeded)))
    assert engine.announcer.shown == [seeded.request_id]  # type: ignore[attr-defined]
    assert engine.resumer.resumed == []  # type: ignore[attr-defined]


def test_expired_requests_are_resumed_and_taken_over_ones_recovered(tmp_path):
    engine, seeded = engine_with_fakes(tmp_path, {})
    engine.background.sweeper = SimpleNamespace(  # type: ignore[assignment]
        expire_due=lambda: [seeded.request_id], remind_due=lambda: 0
    )
    assert engine.sweep().expired == 1
    engine.claims.take_over_stale = lambda: [seeded.request_id]  # type: ignore[method-assign]
    assert engine.reconcile().resumed == 1
    assert engine.resumer.resumed == [  # type: ignore[attr-defined]
        (seeded.request_id, False),
        (seeded.request_id, True),
    ]
