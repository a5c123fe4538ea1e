"""A run's end: recorded in one statement that reads nothing first, on the run's row only when
no cancel ended it, with the result told to the thread as the row now says."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session

from agent_runtime.graph_runtime import close_checkpointer
from store.repositories import RunRepository
from store.statuses import RunStatus
from tests.agent_runtime.engine_env import (
    REQUESTER,
    REVIEWER,
    SEND,
    Env,
    decide,
    make_env,
    paused_run,
)


def test_a_completed_run_is_recorded_in_one_statement_with_no_read_before_it(env: Env) -> None:
    """Its end writes the run's row and returns what the thread is told: no load of the run
    through the ORM first, then a flush (each costs CPU on every approval)."""
    run_id, action_id = paused_run(env)
    statements: list[str] = []
    through_orm: list[str] = []

    def note(state: ORMExecuteState) -> None:
        through_orm.append(str(state.statement).split("\n")[0][:70])

    event.listen(env.db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    event.listen(Session, "do_orm_execute", note)
    try:
        assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").completed
    finally:
        event.remove(Session, "do_orm_execute", note)
    on_runs = [" ".join(s.split())[:40] for s in statements if " runs" in s.split("WHERE")[0]]
    # On PostgreSQL inside the statement that closes its request (``store.request_end``).
    assert any("UPDATE runs SET status" in s for s in statements), statements
    assert not any(s.startswith("SELECT runs.id") for s in on_runs), on_runs
    loads_or_ends = ("SELECT runs.id", "UPDATE runs SET status")
    assert not [s for s in through_orm if s.startswith(loads_or_ends)], through_orm
    (told,) = env.notes.finished
    assert (told.id, told.status) == (run_id, RunStatus.COMPLETED)
    assert told.result_text and told.requester_id == "U0ALICE"
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None and run.status == RunStatus.COMPLETED
        assert run.result_text == told.result_text


def test_the_end_of_a_run_that_is_not_there_is_an_error_not_a_silence(env: Env) -> None:
    with pytest.raises(LookupError):
        env.engine.runs.fail("run_never_recorded", "The agent failed")
    assert env.notes.finished == []


def test_a_cancelled_run_stays_cancelled_and_its_thread_is_not_told_again(env: Env) -> None:
    run_id, _action_id = paused_run(env)
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None
        RunRepository(s).set_status(run, RunStatus.CANCELLED)
    env.engine.runs.fail(run_id, "The agent failed")
    with env.db.transaction() as s:
        assert RunRepository(s).status(run_id) == RunStatus.CANCELLED
    assert env.notes.finished == []


def test_a_result_with_a_nul_character_is_kept_as_the_store_can_hold_it(env: Env) -> None:
    """An agent's text is anything: PostgreSQL refuses NUL in text, which would leave the run
    unended (and, ended with its request, the request too) after every retry."""
    run_id, _action_id = paused_run(env)
    env.engine.runs.fail(run_id, "The agent failed: \x00 in its output")
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None and run.status == RunStatus.FAILED
        assert run.result_text == "The agent failed: \ufffd in its output"
    assert [r.result_text for r in env.notes.finished] == [run.result_text]


def test_a_request_with_a_nul_character_starts_its_run_with_it_cleaned(env: Env) -> None:
    """A slash command's text is anything Slack delivers: a run is started, never refused by
    the store, with U+FFFD where PostgreSQL cannot hold a character."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="publish \x00 notes")
    with env.db.transaction() as s:
        stored = RunRepository(s).get(run.id)
        assert stored is not None and stored.request_text == "publish \ufffd notes"


def test_an_interrupt_the_store_cannot_keep_fails_its_run_and_says_why(tmp_path: Path) -> None:
    """A review whose arguments are not JSON (a Python date, with no schema to turn it into
    text) can be neither stored nor shown: the run fails with the reason, in its thread,
    instead of staying "running" with no card."""
    env = make_env(tmp_path, "tests.agent_runtime.custom_graphs:review_of_a_date")
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text="launch")
        env.engine.execute_run(run.id)
        (finished,) = env.notes.finished
        assert finished.id == run.id and finished.status == RunStatus.FAILED
        assert "schedule_launch" in str(finished.result_text)
        assert env.notes.requested == []
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def _in_one_transaction(sent: list[str], first: str, then: str) -> list[str]:
    """The statements from the last one holding ``first`` to the next starting with ``then``
    (which must come after it)."""
    start = max(i for i, q in enumerate(sent) if first in q)
    end = next(i for i, q in enumerate(sent) if i > start and q.startswith(then))
    return sent[start : end + 1]


def _watch(env: Env) -> list[str]:
    sent: list[str] = []
    event.listen(env.db.engine, "commit", lambda _conn: sent.append("COMMIT"))
    event.listen(env.db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    return sent


def test_a_resume_that_ends_its_run_writes_both_ends_then_the_audit_in_one_commit(
    env: Env,
) -> None:
    """The request's row, then the run's, then the audit chain: the order every transaction
    takes its locks in, so two of them never wait on each other."""
    run_id, action_id = paused_run(env)
    sent = _watch(env)
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").completed
    closing = _in_one_transaction(sent, "UPDATE approval_requests SET status", "COMMIT")
    ends = [i for i, q in enumerate(closing) if "UPDATE runs SET status" in q]
    audit = [i for i, q in enumerate(closing) if "audit_" in q.split("WHERE")[0]]
    assert len(ends) == 1 and audit and ends[0] < min(audit), closing
    # On PostgreSQL one statement writes both ends (``store.request_end``): the request first.
    assert closing[ends[0]].find("UPDATE runs") > closing[ends[0]].find("approval_requests SET")
    assert [r.id for r in env.notes.finished] == [run_id]


def test_a_resume_that_fails_ends_the_request_and_its_run_in_one_commit(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both quote the failure, which may hold anything (a NUL here, which PostgreSQL refuses
    in text: the commit of both ends would fail, after every retry)."""
    run_id, action_id = paused_run(env)

    def unreachable(*_args: object, **_kwargs: object) -> None:
        raise ConnectionError("the mail server is down: \x00")

    monkeypatch.setattr(env.runtime, "invoke", unreachable)
    sent = _watch(env)
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    closing = _in_one_transaction(sent, "UPDATE approval_requests SET status", "COMMIT")
    assert [q for q in closing if "UPDATE runs SET status" in q], closing
    with env.db.transaction() as s:
        run = RunRepository(s).get(run_id)
        assert run is not None and run.status == RunStatus.FAILED
        assert run.requests[0].status == "failed"
        assert (run.requests[0].outcome or "").endswith("the mail server is down: \ufffd")
    assert [(r.id, r.status) for r in env.notes.finished] == [(run_id, RunStatus.FAILED)]


def test_a_run_that_ended_records_no_new_approval_and_stays_ended(env: Env) -> None:
    """A stop recorded after the run ended (e.g. a resume of one of its interrupts failed it
    while the same stop lists another) must not put it back to waiting: its approvals would
    be spendable again, and its thread was told it stopped."""
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
    with env.db.transaction() as s:
        found = RunRepository(s).get(run.id)
        assert found is not None
        RunRepository(s).set_status(found, RunStatus.FAILED, result_text="stopped")
    env.engine.execute_run(run.id)
    with env.db.transaction() as s:
        found = RunRepository(s).get(run.id)
        assert found is not None
        assert (found.status, found.requests) == (RunStatus.FAILED, [])
    assert env.notes.requested == []
