"""The engine against a real SQLite store and checkpointer, with a notifier that records."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event, select

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.errors import AgentLoadError, NotPermitted
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.wire import final_text
from store.audit_models import AuditEvent
from store.models import Action, ApprovalRequest, Run
from tests.agent_runtime.engine_env import (
    REQUESTER,
    REVIEWER,
    SEND,
    Clock,
    Env,
    decide,
    make_env,
    paused_run,
)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path)
    yield e
    close_checkpointer(e.runtime.checkpointer)
    e.db.dispose()


def test_interrupt_is_recorded_with_policy_and_card_reference(env):
    run_id, action_id = paused_run(env)
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        action = s.get(Action, action_id)
        assert (request.run_id, request.status, request.card_ts) == (run_id, "pending", "1.0")
        assert action.tool_name == "send_external_message"
        assert action.approver_roles == ["release-managers", "security"]
        assert len(action.action_hash) == 64 and action.operation_id.startswith("op_")
        assert action.tool_call_id is not None


def test_executing_a_run_twice_does_not_start_it_again(env):
    run_id, _ = paused_run(env)
    env.engine.execute_run(run_id)
    assert len(env.notes.requested) == 1


def test_drift_between_card_and_checkpoint_invalidates_and_runs_nothing(env):
    run_id, action_id = paused_run(env)
    with env.db.transaction() as s:
        s.get(Action, action_id).action_hash = "0" * 64  # what reviewers saw is not what waits
    result = decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert result.refusal is None
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        assert request.status == "invalidated"
        assert "changed since it was reviewed" in request.outcome
        assert s.get(Run, run_id).status == "failed"
    assert env.workspace.effects() == []
    assert env.notes.updated[-1].status == "invalidated"


def test_resume_never_starts_a_fresh_run_when_the_thread_is_gone(env):
    run_id, action_id = paused_run(env)
    env.runtime.checkpointer.delete_thread(run_id)
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    with env.db.transaction() as s:
        request = s.scalars(select(ApprovalRequest)).one()
        assert request.status == "invalidated"
        assert "thread is gone" in request.outcome
    assert not env.runtime.has_checkpoint(run_id), "nothing was started from START"
    assert env.workspace.effects() == []


def test_refusals_are_audited_and_change_nothing(env):
    _run_id, action_id = paused_run(env)
    assert decide(env, action_id=action_id, actor=REQUESTER, decision="approve").refusal == (
        Refusal.SELF_APPROVAL
    )
    assert decide(env, action_id="act_missing", actor=REVIEWER, decision="approve").refusal == (
        Refusal.UNKNOWN_APPROVAL
    )
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="reject").refusal == (
        Refusal.REASON_REQUIRED
    )
    with env.db.transaction() as s:
        refused = s.scalars(select(AuditEvent).where(AuditEvent.outcome == "refused")).all()
        assert [e.reason for e in refused] == [
            "self_approval",
            "unknown_approval",
            "reason_required",
        ]
        assert s.scalars(select(ApprovalRequest)).one().status == "pending"


def test_not_a_requester_cannot_start_runs(tmp_path):
    e = make_env(tmp_path)
    e.with_policy(requesters=("security",))
    with pytest.raises(NotPermitted):
        e.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)


def test_an_interrupt_we_cannot_review_fails_the_run_clearly(tmp_path):
    e = make_env(tmp_path, agent="tests.agent_runtime.custom_graphs:custom_interrupt_graph")
    run = e.engine.start_run(actor=REQUESTER, channel_id="C1", text="anything")
    e.engine.execute_run(run.id)
    assert e.notes.requested == []
    assert e.notes.finished[-1].status == "failed"
    assert "cannot review" in e.notes.finished[-1].result_text


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("tests.agent_runtime.custom_graphs:not_a_graph", "not a compiled LangGraph graph"),
        ("tests.agent_runtime.custom_graphs:absent", "cannot be loaded"),
        ("no_such_module:build", "cannot be loaded"),
    ],
)
def test_bad_agent_hook_is_a_clear_error(tmp_path, agent, message):
    with pytest.raises(AgentLoadError, match=message):
        make_env(tmp_path, agent=agent)


PUBLISH = 'publish_report {"path": "reports/weekly.md", "channel": "public"}'
REL2 = Actor("U0REL2", "T1")


def test_an_edit_rebinds_the_action_and_old_approvals_stop_counting(env):
    _run_id, action_id = paused_run(env, PUBLISH)
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is None
    edited = {"path": "reports/weekly.md", "channel": "internal"}
    result = decide(env, action_id=action_id, actor=REL2, decision="edit", edited_args=edited)
    assert result.refusal is None and not result.completed
    view = result.approval.actions[0]
    assert view.approvers == ("U0REL2",), "the approval of the earlier version no longer counts"
    assert view.edited_args == {**edited, "notify_subscribers": True}, "stored normalized"
    assert env.workspace.effects() == []

    again = decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert again.refusal is None and again.completed
    assert [(e["tool"], e["channel"]) for e in env.workspace.effects()] == [
        ("publish_report", "internal")
    ]
    with env.db.transaction() as s:
        action = s.get(Action, action_id)
        assert action.outcome == "edited"
        assert action.current_hash != action.action_hash
        assert [d.action_hash for d in action.decisions] == [
            action.action_hash,
            action.current_hash,
            action.current_hash,
        ]


def test_an_edit_without_arguments_is_refused(env):
    _run_id, action_id = paused_run(env, PUBLISH)
    refusal = decide(env, action_id=action_id, actor=REVIEWER, decision="edit").refusal
    assert refusal == Refusal.INVALID_EDIT


def test_pending_for_lists_what_a_reviewer_may_decide(env):
    _run_id, action_id = paused_run(env)
    assert [v.actions[0].id for v in env.engine.pending_for(REVIEWER)] == [action_id]
    assert env.engine.pending_for(REQUESTER) == [], "not the requester's own run"
    assert env.engine.pending_for(Actor("U0MALLORY", "T1")) == []
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert env.engine.pending_for(REVIEWER) == []


def test_pending_for_includes_questions_for_the_requester(env):
    _run_id, action_id = paused_run(env, 'ask_user {"question": "Which version?"}')
    assert [v.actions[0].id for v in env.engine.pending_for(REQUESTER)] == [action_id]
    assert env.engine.pending_for(REVIEWER) == []


def test_a_decision_that_completes_a_request_writes_its_status_once_per_change(env):
    """Claimed, then finished: two writes of the request's status, and a redo is found among
    the decisions read under the request's lock, not by a query of its own."""
    _run_id, action_id = paused_run(env)
    sent: list[str] = []
    event.listen(env.db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    result = decide(env, action_id=action_id, actor=REVIEWER, decision="approve", attempt_key="k")
    assert result.completed
    status_writes = [q for q in sent if q.startswith("UPDATE approval_requests SET status")]
    assert len(status_writes) == 2, status_writes
    assert not [q for q in sent if "decisions.attempt_key =" in q]
    with env.db.transaction() as s:
        assert s.scalars(select(ApprovalRequest.status)).one() == "resolved"


def test_a_failed_resume_quoting_a_redacted_argument_keeps_it_out_of_the_audit(
    tmp_path, monkeypatch
):
    """An agent's failure after the decision often quotes the call (``could not reach
    <recipient>``): the ``resume_failed`` and ``run_failed`` reasons keep it redacted too."""
    import json

    from sqlalchemy import select

    from agent_runtime.policy import Policy
    from store.audit_models import AuditEvent
    from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run

    rule_for = Policy.rule_for

    def redacting(self, tool_name):  # type: ignore[no-untyped-def]
        rule = rule_for(self, tool_name)
        return rule.model_copy(update={"redact": ("recipient",)})

    monkeypatch.setattr(Policy, "rule_for", redacting)
    env = make_env(tmp_path)
    _run_id, action_id = paused_run(env)

    def unreachable(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise ConnectionError("could not reach a@example.com's mail server")

    monkeypatch.setattr(env.runtime, "invoke", unreachable)
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    with env.db.transaction() as s:
        events = list(s.scalars(select(AuditEvent).where(AuditEvent.kind != "run_started")))
        kept = json.dumps([[e.kind, e.reason, e.detail] for e in events])
    assert "resume_failed" in kept and "run_failed" in kept and "could not reach" in kept
    assert "a@example.com" not in kept


def test_a_run_that_completes_after_its_resume_is_not_read_again(env):
    """Finishing the run is one conditional update (which checks it was not cancelled), with
    no read before it; marking its result posted is another, not a read."""
    run_id, action_id = paused_run(env)
    sent: list[str] = []
    event.listen(env.db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert [q for q in sent if q.startswith("SELECT runs.id")] == [], sent
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None
        assert (run.status, run.result_posted) == ("completed", True)
    assert [r.id for r in env.notes.finished] == [run_id]


def test_a_resume_that_ends_its_run_records_both_ends_in_one_transaction(env):
    """The request's end and its run's are one commit: no crash can leave an approval
    resolved under a run still waiting, with its result unrecorded until a lease passes."""
    run_id, action_id = paused_run(env)
    sent: list[str] = []
    event.listen(env.db.engine, "begin", lambda _conn: sent.append("BEGIN"))
    event.listen(env.db.engine, "commit", lambda _conn: sent.append("COMMIT"))
    event.listen(env.db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    status_writes = [
        i for i, q in enumerate(sent) if q.startswith("UPDATE approval_requests SET status")
    ]
    closed = status_writes[-1]  # claimed, then closed
    ended = next(i for i, q in enumerate(sent) if q.startswith("UPDATE runs SET status"))
    between = sent[min(closed, ended) : max(closed, ended)]
    assert "COMMIT" not in between and "BEGIN" not in between, between
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == "completed"
        kinds = list(s.scalars(select(AuditEvent.kind).order_by(AuditEvent.id)))
    assert kinds[-2:] == ["resumed", "run_completed"], kinds
    assert [r.id for r in env.notes.finished] == [run_id]


def test_a_resume_reads_the_thread_once_before_it_and_takes_where_it_stopped_from_the_run(env):
    """The check before a resume reads the checkpoint; where the resume left the thread (its
    end, or its next interrupt with a new card) comes with the run's own output, not from a
    second read of the checkpoint on the reviewer's wait."""
    run_id, action_id = paused_run(env)
    reads: list[str] = []
    read = env.runtime.state

    def counted(thread_id: str):  # type: ignore[no-untyped-def]
        reads.append(thread_id)
        return read(thread_id)

    env.runtime.state = counted  # type: ignore[method-assign]
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    assert reads == [run_id]
    answer = final_text(read(run_id).values)  # the agent's last word, as the checkpoint has it
    assert answer != final_text({})
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None
        assert (run.status, run.result_text) == ("completed", answer)
    assert [(r.id, r.result_text) for r in env.notes.finished] == [(run_id, answer)]


def test_a_failed_read_of_where_a_resume_stopped_leaves_it_to_recovery(tmp_path):
    """The resume ran; reading where it left the thread failed (the store went away for a
    moment). That is not a failed run: the request stays claimed, and its lease running out
    has it finished by recovery, as after a crash: here by what the evidence says (this
    graph's effect leaves neither a tool result nor an execution record)."""
    clock = Clock()
    env = make_env(tmp_path, "tests.agent_runtime.custom_graphs:review_then_answer", clock=clock)
    try:
        run_id, action_id = paused_run(env)
        read = env.runtime.state
        reads: list[str] = []

        def flaky(thread_id: str):  # type: ignore[no-untyped-def]
            reads.append(thread_id)
            if len(reads) > 1:  # the check before the resume reads it once
                raise ConnectionError("the checkpoint store went away")
            return read(thread_id)

        env.runtime.state = flaky  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
        with env.db.transaction() as s:
            run = s.get(Run, run_id)
            request = s.scalars(select(ApprovalRequest)).one()
            assert run is not None and (request.status, run.status) == ("resuming", "waiting")
        assert env.notes.finished == []
        env.runtime.state = read  # type: ignore[method-assign]
        clock.now += dt.timedelta(minutes=11)  # the claim's lease ran out
        assert env.engine.reconcile().resumed == 1
        with env.db.transaction() as s:
            request = s.scalars(select(ApprovalRequest)).one()
            assert request.status == "failed"
            assert "nothing shows whether it ran" in str(request.outcome)
        assert _status(env, run_id) == "failed"
        assert [r.id for r in env.notes.finished] == [run_id]
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_failed_read_of_where_a_first_run_stopped_is_read_again_by_maintenance(tmp_path):
    """The agent ran to its first stop, and reading where failed (the store went away for a
    moment). Nothing would start that thread again: the run is left waiting with nothing
    open, and maintenance reads its stop once it settled, and posts its card."""
    clock = Clock()
    env = make_env(tmp_path, "tests.agent_runtime.custom_graphs:review_then_answer", clock=clock)
    try:
        run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=SEND)
        read = env.runtime.state

        def gone(thread_id: str):  # type: ignore[no-untyped-def]
            raise ConnectionError("the checkpoint store went away")

        env.runtime.state = gone  # type: ignore[method-assign]
        env.engine.execute_run(run.id)
        env.runtime.state = read  # type: ignore[method-assign]
        assert (_status(env, run.id), env.notes.requested, env.notes.finished) == (
            "waiting",
            [],
            [],
        )
        clock.now += dt.timedelta(minutes=11)  # past a lease: no one is at work on it
        assert env.engine.reconcile().advanced == 1
        assert [a.run.id for a in env.notes.requested] == [run.id]
        assert _status(env, run.id) == "waiting" and env.notes.finished == []
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def _status(env: Env, run_id: str) -> str:
    with env.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None
        return run.status
