"""Recording a decision: the transactions and statements it takes, and who may give it when the
roles come from user groups, whichever process recorded the action."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.decisions import Attempt
from agent_runtime.engine import ApprovalEngine
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.notifier import MessageRef
from store.locks import ThreadLocks
from store.repositories import ApprovalRepository, DecisionRepository
from store.statuses import RequestStatus
from tests.agent_runtime.engine_env import REVIEWER, Env, decide, make_env, paused_run
from tests.held import held_by_another_thread
from tests.wire import watching

PUBLISH = 'publish_report {"path": "notes.md"}'  # release managers (users or S0RELMGR)
GROUPIE = Actor("U0GROUPIE", "T1")  # a release manager through the S0RELMGR user group
OUTSIDER = Actor("U0NOBODY", "T1")


class Lookups:
    """The user group directory, noting each look-up in the same log as the transactions."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __call__(self, group: str) -> frozenset[str]:
        self.log.append(f"lookup {group}")
        return frozenset({GROUPIE.user_id}) if group == "S0RELMGR" else frozenset()


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Env, list[str]]]:
    url = None if request.param == "sqlite" else request.getfixturevalue("migrated_pg_url")
    log: list[str] = []
    env = make_env(tmp_path, url=url, usergroup_members=Lookups(log))
    yield env, log
    close_checkpointer(env.runtime.checkpointer)
    env.db.dispose()


def _watch(env: Env, log: list[str]) -> None:
    event.listen(env.db.engine, "begin", lambda _conn: log.append("begin"))
    event.listen(env.db.engine, "before_cursor_execute", lambda *a: log.append(a[2]))


def card_now(env: Env, action_id: str) -> tuple[str | None, str | None]:
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get_by_action(action_id)
        assert request is not None
        return request.card_ts, request.card_status


def _attempt(env: Env, action_id: str, actor: Actor) -> Attempt:
    view = env.engine.approval_of_action(action_id)
    assert view is not None
    seen = next(a.action_hash for a in view.actions if a.id == action_id)
    return Attempt(actor=actor, decision="approve", seen_hash=seen)


def test_a_decision_on_an_action_this_process_recorded_takes_one_transaction(
    world: tuple[Env, list[str]],
) -> None:
    """The action's approver roles are known from when it was recorded: no transaction of
    its own to read them, and the user group is looked up before the decision's."""
    env, log = world
    _run, action_id = paused_run(env, PUBLISH)
    attempt = _attempt(env, action_id, GROUPIE)
    log.clear()
    _watch(env, log)
    result = env.engine.decisions.record(action_id=action_id, attempt=attempt)
    assert result.refusal is None
    assert log.count("begin") == 1, [e for e in log if not e.startswith(("SELECT", "INSERT"))]
    assert log.index("lookup S0RELMGR") < log.index("begin")


def test_the_request_is_found_and_locked_by_its_action_in_one_statement(
    world: tuple[Env, list[str]],
) -> None:
    """No read of the action alone before the request's lock: the decision's first statement
    locks (or, on SQLite, reads) the request through its action's id."""
    env, log = world
    _run, action_id = paused_run(env, PUBLISH)
    attempt = _attempt(env, action_id, GROUPIE)
    log.clear()
    _watch(env, log)
    env.engine.decisions.record(action_id=action_id, attempt=attempt)
    statements = [e for e in log if e.startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"))]
    assert "approval_requests" in statements[0] and "JOIN actions" in statements[0], statements[0]
    if env.db.engine.dialect.name == "postgresql":
        assert "FOR UPDATE OF approval_requests" in statements[0]


@pytest.mark.parametrize(
    ("actor", "refusal"), [(GROUPIE, None), (OUTSIDER, Refusal.NOT_AN_APPROVER)]
)
def test_another_process_reads_the_roles_first_and_decides_the_same(
    world: tuple[Env, list[str]], actor: Actor, refusal: Refusal | None
) -> None:
    """A replica that did not record the action reads its roles in a transaction before the
    decision's and looks up the group in between; the outcome is the same."""
    env, log = world
    _run, action_id = paused_run(env, PUBLISH)
    replica = ApprovalEngine(
        db=env.db,
        runtime=env.runtime,
        policy=env.policy,
        notifier=env.notes,
        usergroup_members=Lookups(log),
    )
    attempt = _attempt(env, action_id, actor)
    log.clear()
    _watch(env, log)
    result = replica.decisions.record(action_id=action_id, attempt=attempt)
    assert result.refusal is refusal
    begins = [i for i, e in enumerate(log) if e == "begin"]
    assert len(begins) == 2
    assert begins[0] < log.index("lookup S0RELMGR") < begins[1]


def _full_loads(log: list[str]) -> int:
    """Reads of a request by its id with its actions joined (a whole request loaded); not the
    gate's read, at the point of effect, of the run's approvals its tool may spend."""
    return sum(
        1
        for e in log
        if e.startswith("SELECT approval_requests.id, approval_requests.run_id")
        and "JOIN actions" in e
        and "WHERE approval_requests.id = " in e
    )


def test_a_completing_decision_loads_its_request_once_in_all(
    world: tuple[Env, list[str]],
) -> None:
    """Once to decide, under its row lock: the resumer starts from what the claiming
    transaction read, checks only the claim and the run, and records the outcome with a
    conditional update."""
    env, log = world
    run_id, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    _watch(env, log)
    log.clear()
    result = env.engine.decide(
        action_id=action_id, actor=REVIEWER, decision="approve", seen_hash=attempt.seen_hash
    )
    assert result.completed
    assert env.notes.finished[-1].id == run_id
    assert env.notes.finished[-1].status == "completed"
    reads = [e[:120] for e in log if "approval_requests" in e]
    assert _full_loads(log) == 1, reads


def test_a_completing_decision_inserts_its_audit_events_in_one_statement(
    world: tuple[Env, list[str]],
) -> None:
    """The decision and the claim are two events of one transaction: written together at its
    commit (on PostgreSQL with the chain's head), not one of them on its own when the claim's
    update runs."""
    env, log = world
    _run, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    _watch(env, log)
    log.clear()
    result = env.engine.decisions.record(action_id=action_id, attempt=attempt)
    assert result.completed
    claim = next(i for i, e in enumerate(log) if "UPDATE approval_requests SET" in e)
    early = [e for e in log[:claim] if "INSERT INTO audit_events" in e]
    assert early == [], "an event went out on its own, before the claim"
    assert sum("INSERT INTO audit_events" in e for e in log) == 1


def status_of(env: Env, action_id: str) -> str:
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get_by_action(action_id)
        assert request is not None
        return request.status


def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        threading.Event().wait(0.005)


CLAIM_READ = "approval_requests.claimed_by, runs.status"
"""The resumer's look at a request's claim and run, when another may have changed them."""


def test_a_completing_decision_takes_its_runs_lock_before_its_commit_and_reads_nothing_again(
    world: tuple[Env, list[str]],
) -> None:
    """The run's thread lock is taken, without waiting, inside the claiming transaction (before
    the audit chain's head is locked): from its commit to the resume nobody can cancel or end
    the run (each of those holds the lock), so the claim as the decision read it is the claim
    now, and the click's path has no read of it."""
    env, log = world
    _run, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    _watch(env, log)
    event.listen(env.db.engine, "commit", lambda _conn: log.append("commit"))
    if env.db.engine.dialect.name == "postgresql":  # the locks have connections of their own
        event.listen(env.db.lock_engine, "before_cursor_execute", lambda *a: log.append(a[2]))
    log.clear()
    result = env.engine.decide(
        action_id=action_id, actor=REVIEWER, decision="approve", seen_hash=attempt.seen_hash
    )
    assert result.completed
    assert not [e for e in log if CLAIM_READ in e], "the claim was read again"
    assert env.notes.finished[-1].status == "completed"
    if env.db.engine.dialect.name == "postgresql":
        taken = next(i for i, e in enumerate(log) if "pg_try_advisory_lock" in e)
        assert log.index("commit") > taken > log.index("begin"), log
        chain = next(i for i, e in enumerate(log) if "FROM audit_head" in e)
        assert taken < chain, "the audit chain's head was held while the lock was tried"
        claim = next(i for i, e in enumerate(log) if "INSERT INTO decisions" in e)
        assert taken < claim, "the claim was written before the run's lock was tried"


def test_a_completing_decision_that_fails_after_taking_its_runs_lock_lets_it_go(
    world: tuple[Env, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's lock is tried before the decision and its claim are written: a write that
    fails then (the store went away) leaves the run free for the next click or a cancel."""
    env, _log = world
    run_id, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    free: list[bool] = []

    def look() -> None:
        """Another thread tries the run's lock."""

        def attempt_it() -> None:
            with env.engine.locks.try_hold(run_id) as held:
                free.append(held)

        other = threading.Thread(target=attempt_it)
        other.start()
        other.join(10)

    def store_gone(*_args: object, **_kwargs: object) -> bool:
        look()  # the lock is held by now
        raise RuntimeError("the store went away")

    monkeypatch.setattr(DecisionRepository, "add_claiming", store_gone)
    with pytest.raises(RuntimeError, match="the store went away"):
        env.engine.decide(
            action_id=action_id, actor=REVIEWER, decision="approve", seen_hash=attempt.seen_hash
        )
    look()
    assert free == [False, True], "the run's lock was not held, or kept after the failure"
    assert status_of(env, action_id) == RequestStatus.PENDING


@pytest.mark.parametrize("holder", ["this process", "another process"])
def test_a_decision_whose_run_is_busy_commits_at_once_and_reads_the_claim_under_the_lock(
    world: tuple[Env, list[str]], holder: str
) -> None:
    """The run works (another resume, a cancel, here or in another process): the decision does
    not wait for it inside its transaction, and holds nothing of the lock it did not get. It
    commits, waits for the lock like any resume, and then looks again at the claim and the
    run, which the holder may have changed: on PostgreSQL in one statement of its own (no
    BEGIN and COMMIT round trips)."""
    env, log = world
    run_id, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    locks = env.engine.locks if holder == "this process" else ThreadLocks(env.db)
    _watch(env, log)
    deciding = threading.Thread(
        daemon=True,  # a decision stuck on the lock must not keep the tests from ending
        target=env.engine.decide,
        kwargs={
            "action_id": action_id,
            "actor": REVIEWER,
            "decision": "approve",
            "seen_hash": attempt.seen_hash,
        },
    )
    with ExitStack() as traced:
        if env.db.engine.dialect.name == "postgresql":
            wire = traced.enter_context(watching(env.db))
        with held_by_another_thread(locks, run_id):
            log.clear()
            deciding.start()
            _until(lambda: status_of(env, action_id) == RequestStatus.RESUMING)
            assert not [e for e in log if CLAIM_READ in e], "read before holding the lock"
        deciding.join(30)  # the holder let go as the block ended
    assert not deciding.is_alive(), "the decision's resume never got the lock"
    assert [e for e in log if CLAIM_READ in e], "the claim must be read under the lock"
    assert env.notes.finished[-1].status == "completed"
    if env.db.engine.dialect.name == "postgresql":
        assert wire.state_after("approval_requests.claimed_by, runs.status") == "I"


def test_a_decision_writes_its_rows_before_the_audit_head_and_flushes_once(
    world: tuple[Env, list[str]],
) -> None:
    """The decision and its action's outcome are Core statements, sent before the audit
    chain's head is locked (lock order: the request's rows, then the chain); the ORM flushes
    nothing, the audit events included: each unit of work costs its bookkeeping on the
    click's path."""
    env, log = world
    _run, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    flushed: list[list[str]] = []

    def note(session: Session, _context: object) -> None:
        flushed.append(sorted(type(o).__name__ for o in [*session.new, *session.dirty]))

    _watch(env, log)
    log.clear()
    event.listen(Session, "after_flush", note)
    try:
        result = env.engine.decisions.record(action_id=action_id, attempt=attempt)
    finally:
        event.remove(Session, "after_flush", note)
    assert result.completed
    assert flushed == [], flushed
    head = next(i for i, e in enumerate(log) if "FROM audit_head" in e)
    for written in ("INSERT INTO decisions", "UPDATE actions SET outcome"):
        at = next((i for i, e in enumerate(log) if written in e), None)
        assert at is not None and at < head, (written, log)


def test_a_decision_asks_the_orm_only_to_load_its_request(
    world: tuple[Env, list[str]],
) -> None:
    """Every other statement of a completing decision (the request's lock, the kill switch,
    the audit chain's head, the claim and its slots, the head's new value) is a Core statement
    on the transaction's connection: through the ORM each costs about twice the CPU, on the
    click's path."""
    env, _log = world
    _run, action_id = paused_run(env)
    attempt = _attempt(env, action_id, REVIEWER)
    through_orm: list[str] = []

    def note(state: ORMExecuteState) -> None:
        through_orm.append(str(state.statement).split("\n")[0][:70])

    event.listen(Session, "do_orm_execute", note)
    try:
        result = env.engine.decisions.record(action_id=action_id, attempt=attempt)
    finally:
        event.remove(Session, "do_orm_execute", note)
    assert result.completed
    assert len(through_orm) == 1, through_orm
    assert through_orm[0].startswith("SELECT approval_requests.id, approval_requests.run_id")


def test_a_sign_off_that_leaves_more_to_give_is_left_to_the_repair_until_drawn(
    world: tuple[Env, list[str]],
) -> None:
    """The first of two approvals is recorded; the process dies before the card is drawn
    again. The status is alike (pending), so only the decision count tells the card is out
    of date: the decision itself must say the card's drawing is not known to be current."""
    env, _log = world
    _run, action_id = paused_run(env, PUBLISH)
    result = env.engine.decisions.record(
        action_id=action_id, attempt=_attempt(env, action_id, REVIEWER)
    )
    assert result.refusal is None and not result.completed
    assert env.engine.announcer.repair_cards() == 1, "the repair must redraw it"
    drawn = env.notes.updated[-1]
    assert [len(a.decisions) for a in drawn.actions] == [1]
    assert env.engine.announcer.repair_cards() == 0


def test_a_click_that_brings_its_card_along_leaves_it_to_the_repair_until_drawn(
    world: tuple[Env, list[str]],
) -> None:
    """The card's reference was not stored yet (its post's answer was lost) when a reviewer
    clicked it: the decision adopts the clicked message, which shows one decision fewer."""
    env, _log = world
    _run, action_id = paused_run(env, PUBLISH)
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get_by_action(action_id)
        assert request is not None
        clicked = MessageRef(request.card_channel or "", request.card_ts or "")
        request.card_ts = request.card_channel = request.card_status = None
    attempt = replace(_attempt(env, action_id, REVIEWER), card=clicked)
    assert not env.engine.decisions.record(action_id=action_id, attempt=attempt).completed
    assert env.engine.announcer.repair_cards() == 1, "the repair must redraw it"
    assert card_now(env, action_id) == (clicked.ts, "pending")


def test_a_completing_decision_takes_five_statements_on_postgresql(
    migrated_pg_url: str, tmp_path: Path
) -> None:
    """Each statement of a click's decision is a round trip on its path, so what belongs
    together goes together: the request's lock with the kill switch's; the decision with its
    action's new outcome and, when it completes the request, the claim and the removal of its
    review slots; the audit events with the chain's head (then only the request's load and the
    head's lock stand alone)."""
    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        _run, action_id = paused_run(env)
        attempt = _attempt(env, action_id, REVIEWER)
        log: list[str] = []
        event.listen(env.db.engine, "before_cursor_execute", lambda *a: log.append(a[2]))
        result = env.engine.decisions.record(action_id=action_id, attempt=attempt)
        assert result.completed
        lock, load, decision, head, audit = log  # five, no more
        assert "FOR UPDATE OF approval_requests" in lock and "execution_switch" in lock
        assert load.startswith("SELECT approval_requests.id, approval_requests.run_id")
        assert "INSERT INTO decisions" in decision and "UPDATE actions" in decision
        assert "UPDATE approval_requests" in decision and "DELETE FROM pending_slots" in decision
        assert "FROM audit_head" in head
        assert "INSERT INTO audit_events" in audit and "UPDATE audit_head" in audit
        with env.db.transaction() as s:
            request = ApprovalRepository(s).get_by_action(action_id)
            assert request is not None
            assert (request.status, request.claimed_by) == ("resuming", env.engine.claims.owner)
            assert [a.outcome for a in request.actions] == ["approved"]
            assert [len(a.decisions) for a in request.actions] == [1]
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_reason_the_store_cannot_keep_as_typed_is_kept_cleaned_not_refused(
    world: tuple[Env, list[str]],
) -> None:
    """A reviewer's reason is anything Slack delivers: one PostgreSQL refuses as text (a NUL)
    is kept with U+FFFD in its place, and the decision stands."""
    env, _log = world
    _run, action_id = paused_run(env)
    rejected = decide(
        env, action_id=action_id, actor=REVIEWER, decision="reject", message="no\x00way"
    )
    assert rejected.refusal is None and rejected.completed
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get_by_action(action_id)
        assert request is not None
        assert [d.message for d in request.actions[0].decisions] == ["no\ufffdway"]
