"""A run's end closes what is still open of it: an approval left with its buttons on a run
that has ended could still be clicked, and a run ended twice tells its thread twice."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from agent_runtime import resume
from agent_runtime.authorization import Refusal
from agent_runtime.errors import InvalidDecisions
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.run_end import CLOSED_WITH_RUN
from agent_runtime.views import ApprovalView
from store.audit_log import AuditRepository
from store.claim_repository import ClaimRepository
from store.executions import ExecutionRepository
from store.models import utcnow
from store.repositories import ApprovalRepository, RunRepository
from store.statuses import ActionOutcome, RequestStatus, RunStatus
from tests.agent_runtime.engine_env import REQUESTER, REVIEWER, SEND, Env, decide, make_env

PER_CALL = "agent_runtime.agents.change_request:build_per_call_agent"
ENV_CHANGE = 'replace_text_file {"path": "config/app.env", "content": "FEATURE_FLAG=on\\n"}'


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    url = None if request.param == "sqlite" else request.getfixturevalue("migrated_pg_url")
    env = make_env(tmp_path, agent=PER_CALL, url=url)
    yield env
    close_checkpointer(env.runtime.checkpointer)
    env.db.dispose()


def two_cards(env: Env) -> tuple[str, ApprovalView, ApprovalView]:
    """A run paused on two approvals at once (one card per call): the send, then the file."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=f"{SEND}\n{ENV_CHANGE}")
    env.engine.execute_run(run.id)
    cards = {c.actions[0].tool_name: c for c in env.notes.requested}
    assert len(cards) == 2
    return run.id, cards["send_external_message"], cards["replace_text_file"]


def request_of(env: Env, request_id: str) -> tuple[str, str | None]:
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        return request.status, request.outcome


def run_status(env: Env, run_id: str) -> tuple[str | None, str | None]:
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None
        return run.status, run.result_text


def watch(env: Env) -> list[tuple[str, Any]]:
    sent: list[tuple[str, Any]] = []
    event.listen(env.db.engine, "commit", lambda _conn: sent.append(("COMMIT", None)))
    event.listen(env.db.engine, "before_cursor_execute", lambda *a: sent.append((a[2], a[3])))
    return sent


def committed_with_the_runs_end(sent: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The statements of the transaction that wrote the run's end."""
    end = next(i for i, (q, _) in enumerate(sent) if "UPDATE runs SET status" in q)
    start = max((i for i in range(end) if sent[i][0] == "COMMIT"), default=-1) + 1
    stop = next(i for i in range(end, len(sent)) if sent[i][0] == "COMMIT")
    return sent[start:stop]


def names(params: Any) -> str:
    return repr(params)


def test_a_run_that_fails_closes_its_other_approval_in_the_same_commit(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The send's resume raises: the run fails, and the file change's card loses its buttons
    in the commit that failed the run (a crash in between would leave it clickable)."""
    run_id, send, change = two_cards(env)

    def down(*_args: object, **_kwargs: object) -> None:
        raise ConnectionError("the mail server is down")

    monkeypatch.setattr(env.runtime, "invoke", down)
    assert change.id in {a.id for a in env.engine.pending_for(REVIEWER)}
    sent = watch(env)
    decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    assert run_status(env, run_id)[0] == RunStatus.FAILED
    status, outcome = request_of(env, change.id)
    assert status == RequestStatus.INVALIDATED
    assert "its run ended" in (outcome or "")
    together = committed_with_the_runs_end(sent)
    closing = [p for q, p in together if q.startswith("UPDATE approval_requests SET status")]
    assert any(change.id in names(p) for p in closing), together
    assert env.engine.pending_for(REVIEWER) == [], "nor is it listed as waiting on anyone"
    drawn = [c for c in env.notes.updated if c.id == change.id]
    assert drawn and drawn[-1].status == RequestStatus.INVALIDATED
    assert drawn[-1].run.status == RunStatus.FAILED
    assert [(r.id, r.status) for r in env.notes.finished] == [(run_id, RunStatus.FAILED)]
    with env.db.transaction() as s:
        events = [(e.kind, e.request_id) for e in AuditRepository(s).for_run(run_id)]
    assert ("invalidated", change.id) in events


def test_a_click_on_an_approval_its_run_closed_is_refused_and_says_why(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, send, change = two_cards(env)

    def down(*_args: object, **_kwargs: object) -> None:
        raise ConnectionError("the mail server is down")

    monkeypatch.setattr(env.runtime, "invoke", down)
    decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    monkeypatch.undo()
    drawn = len(env.notes.updated)
    result = decide(env, action_id=change.actions[0].id, actor=REVIEWER, decision="approve")
    assert result.refusal is Refusal.REQUEST_CLOSED
    assert [c.id for c in env.notes.updated[drawn:]] == [change.id], "its card is redrawn"
    assert env.workspace.effects() == []
    assert run_status(env, run_id)[0] == RunStatus.FAILED


def test_an_invalidated_approval_closes_its_runs_other_approval_and_tells_the_thread_once(
    env: Env,
) -> None:
    """A policy change found at a click invalidates the card clicked; the run can never go on,
    so its other card is closed with it."""
    run_id, send, change = two_cards(env)
    env.with_policy(version="2099-01-01")
    result = decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    assert result.refusal is Refusal.POLICY_CHANGED
    assert request_of(env, send.id)[0] == RequestStatus.INVALIDATED
    assert request_of(env, change.id)[0] == RequestStatus.INVALIDATED
    assert [(r.id, r.status) for r in env.notes.finished] == [(run_id, RunStatus.FAILED)]


def test_a_policy_change_found_while_the_run_works_leaves_it_as_it_was(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its run holds its lock (the agent or a tool is working): the click is refused all the
    same, and nothing is closed meanwhile; the next click, once the run waits, closes it."""
    monkeypatch.setattr("agent_runtime.engine.CANCEL_WAIT_SECONDS", 0.2)
    run_id, send, change = two_cards(env)
    env.with_policy(version="2099-01-01")
    with env.engine.locks.hold(run_id):
        result = decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
        assert result.refusal is Refusal.POLICY_CHANGED
        assert request_of(env, send.id)[0] == RequestStatus.PENDING
        assert run_status(env, run_id)[0] == RunStatus.WAITING
    decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    assert request_of(env, send.id)[0] == RequestStatus.INVALIDATED
    assert request_of(env, change.id)[0] == RequestStatus.INVALIDATED
    assert [(r.id, r.status) for r in env.notes.finished] == [(run_id, RunStatus.FAILED)]


def test_an_approval_claimed_before_its_run_ended_is_not_resumed(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file change was decided and claimed, but its resume waited on the run's lock while
    the send's resume failed the run: the thread is not moved again, and the card says why."""
    run_id, send, change = two_cards(env)
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get(change.id)
        assert request is not None
        request.actions[0].outcome = ActionOutcome.APPROVED
        s.flush()
        assert ClaimRepository(s).claim(
            change.id, owner=env.engine.claims.owner, lease=env.engine.claims.lease
        )
    invoked: list[object] = []

    def down(*args: object, **_kwargs: object) -> None:
        invoked.append(args[0])
        raise ConnectionError("the mail server is down")

    monkeypatch.setattr(env.runtime, "invoke", down)
    decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    assert run_status(env, run_id)[0] == RunStatus.FAILED
    assert request_of(env, change.id)[0] == RequestStatus.RESUMING, "its claim is its own"
    resumed = env.engine.resumer.resume(change.id)
    assert resumed.after is None and resumed.ended is None
    assert len(invoked) == 1, "only the send's resume reached the thread"
    status, outcome = request_of(env, change.id)
    assert (status, outcome) == (RequestStatus.INVALIDATED, "its run has already ended")
    assert run_status(env, run_id)[0] == RunStatus.FAILED
    assert [(r.id, r.status) for r in env.notes.finished] == [(run_id, RunStatus.FAILED)]


def test_decisions_the_thread_cannot_take_fail_the_run_and_close_the_rest_of_it(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing will ever resume that interrupt: a run left waiting would be found stalled at
    every maintenance round, its requester never told, its other card still live."""
    run_id, send, change = two_cards(env)

    def refused(*_args: object, **_kwargs: object) -> None:
        raise InvalidDecisions("'respond' is not allowed for 'send_external_message'")

    monkeypatch.setattr(resume, "build_resume", refused)
    decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    status, text = run_status(env, run_id)
    assert status == RunStatus.FAILED and "not allowed" in (text or "")
    assert request_of(env, send.id)[0] == RequestStatus.FAILED
    assert request_of(env, change.id)[0] == RequestStatus.INVALIDATED
    assert [(r.id, r.status) for r in env.notes.finished] == [(run_id, RunStatus.FAILED)]
    assert env.workspace.effects() == []


def test_a_run_that_ended_is_not_ended_again_nor_its_thread_told_twice(env: Env) -> None:
    run_id, _send, _change = two_cards(env)
    env.engine.runs.fail(run_id, "The agent failed: first")
    env.engine.runs.fail(run_id, "The agent failed: second")
    assert run_status(env, run_id) == (RunStatus.FAILED, "The agent failed: first")
    assert [r.result_text for r in env.notes.finished] == ["The agent failed: first"]
    with env.db.transaction() as s:
        kinds = [e.kind for e in AuditRepository(s).for_run(run_id)]
    assert kinds.count("run_failed") == 1


def spent_before_the_run_ended(env: Env, request_id: str, *, result: str | None) -> str:
    """The request decided and claimed, and its call started (finished, if ``result``), as a
    process that died resuming it left it; the run then failed by another path."""
    with env.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        action = request.actions[0]
        action.outcome = ActionOutcome.APPROVED
        s.flush()
        claims = env.engine.claims
        assert ClaimRepository(s).claim(request_id, owner=claims.owner, lease=claims.lease)
        spends = ExecutionRepository(s)
        tool = action.tool_name
        assert spends.start(action.id, tool=tool, key="k", tool_call_id=action.tool_call_id)
        if result is not None:
            ExecutionRepository(s).finish(action.id, result=result)
        return request.run_id


def never_invoked(env: Env, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    invoked: list[object] = []
    monkeypatch.setattr(env.runtime, "invoke", lambda *args, **_kw: invoked.append(args[0]))
    return invoked


def test_an_approval_whose_call_ran_before_its_run_ended_is_told_not_denied(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ran is told, never denied, and the thread of an ended run is not moved again."""
    _run_id, _send, change = two_cards(env)
    run_id = spent_before_the_run_ended(env, change.id, result="replaced config/app.env")
    env.engine.runs.fail(run_id, "The agent failed: elsewhere")
    invoked = never_invoked(env, monkeypatch)
    env.engine.resumer.resume(change.id, recovering=True)
    assert invoked == []
    assert request_of(env, change.id)[0] == RequestStatus.RESOLVED
    assert env.workspace.effects() == []
    assert run_status(env, run_id) == (RunStatus.FAILED, "The agent failed: elsewhere")


def test_an_approval_whose_call_was_cut_short_before_its_run_ended_says_it_is_unknown(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its effect may or may not have happened: the card and the audit say so, never "did not
    run" (the gate refuses a call of an ended run, which the agent would have reported)."""
    _run_id, _send, change = two_cards(env)
    run_id = spent_before_the_run_ended(env, change.id, result=None)
    env.engine.runs.fail(run_id, "The agent failed: elsewhere")
    invoked = never_invoked(env, monkeypatch)
    env.engine.resumer.resume(change.id, recovering=True)
    assert invoked == []
    status, outcome = request_of(env, change.id)
    assert status == RequestStatus.FAILED
    assert "whether its effect happened is unknown" in (outcome or "")
    with env.db.transaction() as s:
        kinds = [e.kind for e in AuditRepository(s).for_run(run_id) if e.request_id == change.id]
    assert "action_effect_unknown" in kinds
    assert run_status(env, run_id)[0] == RunStatus.FAILED


def test_reconciling_closes_approvals_a_run_ended_without(env: Env) -> None:
    """A run ended by an older version, which left its other approval pending: the next round
    of reconciling closes it, audits it and draws its card."""
    run_id, _send, change = two_cards(env)
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None
        RunRepository(s).set_status(run, RunStatus.FAILED, result_text="The agent failed")
    drawn = len(env.notes.updated)
    assert env.engine.reconcile().closed == 2
    assert request_of(env, change.id) == (RequestStatus.INVALIDATED, CLOSED_WITH_RUN)
    assert {c.id for c in env.notes.updated[drawn:]} >= {change.id}
    assert env.engine.reconcile().closed == 0
    with env.db.transaction() as s:
        kinds = [e.kind for e in AuditRepository(s).for_run(run_id) if e.request_id == change.id]
    assert kinds.count("invalidated") == 1
    assert env.notes.finished == [], "its thread was told when it ended"


def test_a_refused_attempt_on_a_closed_approval_redraws_its_card(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt refused as a whole (e.g. approve all) on a card still showing its buttons
    redraws it at once, as a refused click does, not at the next repair round."""
    _run_id, send, change = two_cards(env)

    def down(*_args: object, **_kwargs: object) -> None:
        raise ConnectionError("the mail server is down")

    monkeypatch.setattr(env.runtime, "invoke", down)
    decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
    drawn = len(env.notes.updated)
    env.engine.record_refusal(
        request_id=change.id,
        actor=REVIEWER,
        refusal=Refusal.REQUEST_CLOSED,
        decision="approve_all",
    )
    assert [(c.id, c.status) for c in env.notes.updated[drawn:]] == [
        (change.id, RequestStatus.INVALIDATED)
    ]


def test_an_approval_an_ended_run_left_without_a_card_is_closed_not_posted(
    tmp_path: Path,
) -> None:
    """Its card was never posted (a lost answer) and its run ended by an older version: the
    next round closes it, and posts no card with buttons for it."""
    now = [utcnow()]
    env = make_env(tmp_path, agent=PER_CALL, clock=lambda: now[0])
    try:
        run_id, _send, change = two_cards(env)
        with env.db.transaction() as s:
            request = ApprovalRepository(s).get(change.id)
            run = RunRepository(s).get(run_id)
            assert request is not None and run is not None
            request.card_channel = request.card_ts = None
            RunRepository(s).set_status(run, RunStatus.FAILED, result_text="The agent failed")
        now[0] += dt.timedelta(minutes=5)  # past the wait before a card is posted again
        posted = len(env.notes.requested)
        result = env.engine.reconcile()
        assert (result.closed, result.cards_posted) == (2, 0)
        assert len(env.notes.requested) == posted
        assert request_of(env, change.id)[0] == RequestStatus.INVALIDATED
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_on_postgresql_a_requests_end_locks_its_runs_other_approvals_in_its_own_statement(
    migrated_pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement that closes the request also locks the run's other pending approvals
    (in id order, after its own row: the lock order of every run's end), one round trip less
    on every approval that ends its run. SQLite has no row locks: its write lock holds all."""
    env = make_env(tmp_path, agent=PER_CALL, url=migrated_pg_url)
    try:
        run_id, send, change = two_cards(env)

        def down(*_args: object, **_kwargs: object) -> None:
            raise ConnectionError("the mail server is down")

        monkeypatch.setattr(env.runtime, "invoke", down)
        sent = watch(env)
        decide(env, action_id=send.actions[0].id, actor=REVIEWER, decision="approve")
        together = [q for q, _ in committed_with_the_runs_end(sent)]
        assert "UPDATE approval_requests SET status" in together[0], together
        assert "FOR NO KEY UPDATE" in together[0]
        locks = [q for q in together[1:] if "FOR NO KEY UPDATE" in q]
        assert locks == [], "the other approvals were locked by a statement of their own"
        assert request_of(env, change.id)[0] == RequestStatus.INVALIDATED
        assert run_status(env, run_id)[0] == RunStatus.FAILED
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_on_postgresql_a_resume_that_ends_its_run_writes_both_ends_in_one_statement(
    migrated_pg_url: str, tmp_path: Path
) -> None:
    """Every approval that ends its run sends its outcome's statements on the click's path:
    the request's end and the run's go together (the request's row locked first), then the
    audit chain's head and the events. Three statements, no more."""
    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
        env.engine.execute_run(run.id)
        card = env.notes.requested[-1]
        sent = watch(env)
        decide(env, action_id=card.actions[0].id, actor=REVIEWER, decision="approve")
        closing, head, events = [q for q, _ in committed_with_the_runs_end(sent)]
        assert "UPDATE approval_requests SET status" in closing, closing
        assert closing.index("UPDATE approval_requests") < closing.index("UPDATE runs")
        assert "FROM audit_head" in head and "INSERT INTO audit_events" in events
        assert run_status(env, run.id)[0] == RunStatus.COMPLETED
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()
