"""Cancelling a run, owner by owner: the canceller on a real store (who may, what it closes,
what it audits), the façade with fakes around it (what it announces), and each later path that
must leave a cancelled run alone (resume, gate, decisions, record_stop)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

import agent_runtime.engine as engine_module
from agent_runtime.announcer import Announcer
from agent_runtime.authorization import Actor, Refusal
from agent_runtime.cancel import CancelOutcome, CancelResult, RunCanceller
from agent_runtime.catalog import ToolCatalog
from agent_runtime.claims import Claims
from agent_runtime.engine import ApprovalEngine
from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.gate import EffectGate, GateRefused
from agent_runtime.notifier import NullNotifier
from agent_runtime.policy import Policy, load_policy
from agent_runtime.resume import Resumer
from agent_runtime.views import ApprovalView, approval_view, run_view
from store.audit_models import AuditEvent
from store.locks import ThreadLocks
from store.models import PendingSlot, utcnow
from store.repositories import ApprovalRepository, RunRepository
from store.statuses import ActionOutcome, RequestStatus, RunStatus
from tests.agent_runtime.rows import seed_request, sqlite_store

REQUESTER = Actor("U0ALICE")
ADMIN = Actor("U0OPS1")
REVIEWER = Actor("U0REL1")
AT = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


def policy_with_admins(**admins: Any) -> Policy:
    base = load_policy(None)
    roles = dict(base.roles)
    roles["admins"] = base.roles["admins"].model_copy(update=admins) if admins else roles["admins"]
    return base.model_copy(update={"roles": roles})


def canceller(db, *, policy: Policy | None = None, groups=None) -> RunCanceller:  # type: ignore[no-untyped-def]
    def members(group: str) -> frozenset[str]:
        if groups is None:
            raise MembershipUnconfirmed(group)
        return frozenset(groups.get(group, ()))

    return RunCanceller(
        db=db, policy=policy or load_policy(None), clock=lambda: AT, usergroup_members=members
    )


def cancel(owner: RunCanceller, run_id: str, *, actor: Actor, **kw: Any) -> CancelResult:
    """As the façade calls the owner: standing first, then the cancel."""
    standing = owner.standing(run_id, actor)
    assert standing is not None
    return owner.cancel(run_id, actor=actor, standing=standing, **kw)


def audit(db, kind: str) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == kind)))


def test_the_requester_cancels_closing_every_open_request_and_its_slots(tmp_path):
    db = sqlite_store(tmp_path)
    first = seed_request(db)
    other = seed_request(db)
    with db.transaction() as s:  # a second open request of the same run, already claimed
        ApprovalRepository(s).get(other.request_id).run_id = first.run_id
        assert Claims(db=db, clock=utcnow, lease=dt.timedelta(minutes=1)).claim(s, other.request_id)
    result = cancel(canceller(db, groups={}), first.run_id, actor=REQUESTER, via={"attempt": "a1"})
    assert result.outcome is CancelOutcome.CANCELLED
    assert {v.id for v in result.closed} == {first.request_id, other.request_id}
    assert {v.status for v in result.closed} == {RequestStatus.CANCELLED}
    assert result.run is not None and result.run.cancelled_by == "U0ALICE"
    assert result.run.cancelled_at == AT
    with db.transaction() as s:
        run = RunRepository(s).get(first.run_id)
        assert (run.status, run.cancelled_by, run.cancelled_at) == ("cancelled", "U0ALICE", AT)
        assert s.scalars(select(PendingSlot)).all() == []
    [event] = audit(db, "run_cancelled")
    assert (event.actor_id, event.run_id, event.outcome) == ("U0ALICE", first.run_id, "allowed")
    assert event.detail["as"] == "requester" and event.detail["attempt"] == "a1"
    assert len(audit(db, "request_cancelled")) == 2


def test_an_admin_may_cancel_through_a_user_group(tmp_path):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    policy = policy_with_admins(users=(), usergroups=("S0OPS",))
    result = cancel(
        canceller(db, policy=policy, groups={"S0OPS": {"U0GRP"}}),
        seeded.run_id,
        actor=Actor("U0GRP"),
    )
    assert result.cancelled
    assert audit(db, "run_cancelled")[0].detail["as"] == "admins"


@pytest.mark.parametrize(
    ("actor", "groups", "expected"),
    [
        (REVIEWER, {}, CancelOutcome.NOT_ALLOWED),
        (Actor("U0REL1", "T_OTHER"), {}, CancelOutcome.OTHER_WORKSPACE),
        (REVIEWER, None, CancelOutcome.MEMBERSHIP_UNCONFIRMED),
    ],
)
def test_anyone_else_is_refused_and_audited(tmp_path, actor, groups, expected):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    with db.transaction() as s:
        RunRepository(s).get(seeded.run_id).team_id = "T1"
    policy = policy_with_admins(usergroups=("S0OPS",))  # membership must be asked for
    result = cancel(canceller(db, policy=policy, groups=groups), seeded.run_id, actor=actor)
    assert result.outcome is expected and result.closed == ()
    with db.transaction() as s:
        assert RunRepository(s).get(seeded.run_id).status == RunStatus.WAITING
        assert ApprovalRepository(s).get(seeded.request_id).status == RequestStatus.PENDING
    [event] = audit(db, "run_cancel_refused")
    assert (event.actor_id, event.reason, event.outcome) == (actor.user_id, expected, "refused")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (RunStatus.COMPLETED, CancelOutcome.FINISHED),
        (RunStatus.FAILED, CancelOutcome.FINISHED),
        (RunStatus.CANCELLED, CancelOutcome.ALREADY_CANCELLED),
    ],
)
def test_a_finished_or_cancelled_run_changes_nothing(tmp_path, status, expected):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    with db.transaction() as s:
        RunRepository(s).get(seeded.run_id).status = status
    result = cancel(canceller(db, groups={}), seeded.run_id, actor=ADMIN)
    assert result.outcome is expected and result.closed == ()
    with db.transaction() as s:
        assert RunRepository(s).get(seeded.run_id).status == status
        assert RunRepository(s).get(seeded.run_id).cancelled_by is None
    assert [e.reason for e in audit(db, "run_cancel_refused")] == [expected]


@dataclass
class FakeAnnouncer:
    shown: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    def show_card(self, view: Any) -> None:
        self.shown.append(view.id)

    def show_cards(self, views: Any) -> None:
        self.shown.extend(view.id for view in views)

    def run_finished(self, run: Any) -> None:
        self.finished.append(run.id)


def engine_with(tmp_path, result: CancelResult | None):  # type: ignore[no-untyped-def]
    """An engine whose canceller answers ``result`` (or the closed seeded request if None)."""
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    engine = ApprovalEngine(
        db=db,
        runtime=SimpleNamespace(catalog=ToolCatalog()),  # type: ignore[arg-type]
        policy=load_policy(None),
        notifier=NullNotifier(),
    )
    engine.announcer = FakeAnnouncer()  # type: ignore[assignment]
    if result is None:
        with db.transaction() as s:
            view = approval_view(ApprovalRepository(s).get(seeded.request_id))
        result = CancelResult(CancelOutcome.CANCELLED, run=view.run, closed=(view,))
    held: list[bool] = []

    def cancel(run_id: str, *, actor: Actor, standing: Any, via: Any = None) -> CancelResult:
        with engine.locks.try_hold(run_id) as free:
            held.append(not free)  # the façade holds the run's lock around the owner
        return result

    engine.cancels.cancel = cancel  # type: ignore[method-assign]
    return engine, seeded, held


def test_the_facade_cancels_under_the_run_lock_then_redraws_cards_and_tells_the_thread(tmp_path):
    engine, seeded, held = engine_with(tmp_path, None)
    view = approval_view_of(engine, seeded.request_id)
    engine.cancel_run(seeded.run_id, actor=REQUESTER)
    assert held == [True]
    assert engine.announcer.shown == [view.id]  # type: ignore[attr-defined]
    assert engine.announcer.finished == [view.run.id]  # type: ignore[attr-defined]


def approval_view_of(engine: ApprovalEngine, request_id: str):  # type: ignore[no-untyped-def]
    with engine.db.transaction() as s:
        return approval_view(ApprovalRepository(s).get(request_id))


def test_the_facade_announces_nothing_for_a_refused_cancel(tmp_path):
    engine, seeded, _held = engine_with(tmp_path, CancelResult(CancelOutcome.NOT_ALLOWED))
    assert engine.cancel_run(seeded.run_id, actor=REVIEWER).outcome is CancelOutcome.NOT_ALLOWED
    assert engine.announcer.shown == engine.announcer.finished == []  # type: ignore[attr-defined]


def test_an_unknown_run_is_refused_and_audited_without_a_lock(tmp_path):
    engine, _seeded, held = engine_with(tmp_path, CancelResult(CancelOutcome.CANCELLED))
    result = engine.cancel_run("run_forged", actor=REVIEWER)
    assert result.outcome is CancelOutcome.UNKNOWN_RUN and held == []
    [event] = audit(engine.db, "run_cancel_refused")
    assert (event.reason, event.run_id, event.detail["run"]) == ("unknown_run", None, "run_forged")


@dataclass
class FakeThread:
    invoked: list[Any] = field(default_factory=list)
    catalog: ToolCatalog = field(default_factory=ToolCatalog)

    def state(self, thread_id: str) -> Any:
        return SimpleNamespace(created_at=utcnow(), interrupts=(), next=(), values={})

    def invoke(self, payload: Any, thread_id: str) -> None:
        self.invoked.append(payload)


def claimed_then_cancelled(tmp_path, *, close_request: bool):  # type: ignore[no-untyped-def]
    """A request approved and claimed by this process; then its run is cancelled."""
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    claims = Claims(db=db, clock=utcnow, lease=dt.timedelta(minutes=1), owner="me")
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        request.actions[0].outcome = ActionOutcome.APPROVED
        assert claims.claim(s, seeded.request_id)
        run = RunRepository(s).get(seeded.run_id)
        run.status = RunStatus.CANCELLED
        if close_request:
            request.status = RequestStatus.CANCELLED
    return db, seeded, claims


@pytest.mark.parametrize("close_request", [True, False])
def test_a_claimed_request_of_a_cancelled_run_is_never_resumed(tmp_path, close_request):
    """The canceller closes the request; should one be left open, the resumer closes it."""
    db, seeded, claims = claimed_then_cancelled(tmp_path, close_request=close_request)
    thread = FakeThread()
    resumer = Resumer(
        db=db,
        runtime=thread,  # type: ignore[arg-type]
        policy=load_policy(None),
        claims=claims,
        announcer=Announcer(db=db, notifier=NullNotifier(), locks=ThreadLocks(db)),
    )
    resumed = resumer.resume(seeded.request_id)
    assert resumed.after is None and resumed.run_failed is None
    assert thread.invoked == []
    with db.transaction() as s:
        assert ApprovalRepository(s).get(seeded.request_id).status == RequestStatus.CANCELLED
        assert RunRepository(s).get(seeded.run_id).status == RunStatus.CANCELLED


def test_invalidating_never_overwrites_a_cancel(tmp_path):
    db, seeded, claims = claimed_then_cancelled(tmp_path, close_request=True)
    resumer = Resumer(
        db=db,
        runtime=FakeThread(),  # type: ignore[arg-type]
        policy=load_policy(None),
        claims=claims,
        announcer=Announcer(db=db, notifier=NullNotifier(), locks=ThreadLocks(db)),
    )
    resumer.invalidate(seeded.request_id, reason="policy changed")
    with db.transaction() as s:
        assert ApprovalRepository(s).get(seeded.request_id).status == RequestStatus.CANCELLED
        assert RunRepository(s).get(seeded.run_id).status == RunStatus.CANCELLED


def test_the_gate_refuses_a_cancelled_run_even_an_approved_call(tmp_path):
    db, seeded, _claims = claimed_then_cancelled(tmp_path, close_request=True)
    gate = EffectGate(
        db=db, policy=load_policy(None), catalog=ToolCatalog(), notifier=NullNotifier()
    )
    with pytest.raises(GateRefused, match="its run was cancelled"):
        gate.authorize(
            {"configurable": {"thread_id": seeded.run_id}},
            tool_name="send_external_message",
            args={"recipient": "a@example.com"},
            tool_call_id="call_1",
        )
    [event] = audit(db, "ungated_call_blocked")
    assert event.reason == "its run was cancelled"


def test_a_decision_on_a_cancelled_run_is_refused_as_such(tmp_path):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    cancel(canceller(db, groups={}), seeded.run_id, actor=REQUESTER)
    engine = ApprovalEngine(
        db=db,
        runtime=SimpleNamespace(catalog=ToolCatalog()),  # type: ignore[arg-type]
        policy=load_policy(None),
        notifier=NullNotifier(),
    )
    result = engine.decide(
        action_id=seeded.action_id, actor=REVIEWER, decision="approve", seen_hash="h" * 64
    )
    assert result.refusal is Refusal.RUN_CANCELLED
    assert [e.reason for e in audit(db, "decision_refused")] == ["run_cancelled"]


def test_a_cancelled_run_records_no_new_stop(tmp_path):
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    cancel(canceller(db, groups={}), seeded.run_id, actor=REQUESTER)
    engine = ApprovalEngine(
        db=db,
        runtime=SimpleNamespace(catalog=ToolCatalog(), state=_never),  # type: ignore[arg-type]
        policy=load_policy(None),
        notifier=NullNotifier(),
    )
    assert list(engine.runs.record_stop(seeded.run_id)) == []
    with db.transaction() as s:
        assert run_view(RunRepository(s).get(seeded.run_id)).status == "cancelled"


def _never(run_id: str) -> Any:
    raise AssertionError("a cancelled run's thread is not read to record a stop")


_REQUESTER_RACE = Actor("U0ALICE")
_REVIEWER_RACE = Actor("U0REL1")


class DrawingNotifier(NullNotifier):
    """Remembers every status a card was drawn with, in the order Slack received them."""

    def __init__(self) -> None:
        self.drawn: list[str] = []

    def approval_updated(self, approval: ApprovalView) -> None:
        self.drawn.append(approval.status)


def test_a_cancel_between_a_decision_and_its_card_update_leaves_the_card_cancelled(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = sqlite_store(tmp_path)
    seeded = seed_request(db)
    policy = load_policy(None)
    with db.transaction() as s:  # two sign-offs needed, card posted, current policy
        request = ApprovalRepository(s).get(seeded.request_id)
        request.policy_version = policy.version
        request.card_channel, request.card_ts = "C1", "2.0"
        request.actions[0].approvals_required = 2
    notifier = DrawingNotifier()
    engine = ApprovalEngine(
        db=db,
        runtime=SimpleNamespace(catalog=ToolCatalog()),  # type: ignore[arg-type]
        policy=policy,
        notifier=notifier,
    )

    def requester_cancels_now(name: str) -> None:
        if name == "after_decision":  # the first sign-off is committed, its card not redrawn
            assert engine.cancel_run(seeded.run_id, actor=_REQUESTER_RACE).cancelled

    monkeypatch.setattr(engine_module, "fault_point", requester_cancels_now)
    result = engine.decide(
        action_id=seeded.action_id, actor=_REVIEWER_RACE, decision="approve", seen_hash="h" * 64
    )
    assert result.refusal is None
    assert notifier.drawn[-1] == "cancelled", notifier.drawn  # Slack shows the last update
    with db.transaction() as s:
        stored = ApprovalRepository(s).get(seeded.request_id)
        assert stored.card_status == stored.status == "cancelled"
