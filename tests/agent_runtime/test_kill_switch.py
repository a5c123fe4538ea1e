"""The kill switch on a real store: who may flip it, what it audits and announces, and that
while it is on neither an approval nor a gated tool gets through."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Connection, event, select, text
from sqlalchemy.exc import OperationalError

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.decision_types import DecisionResult
from agent_runtime.gate import GateRefused
from agent_runtime.graph_runtime import close_checkpointer
from agent_runtime.kill_switch import KillSwitch, SwitchOutcome
from agent_runtime.notifier import NullNotifier
from agent_runtime.policy import Policy
from store.audit_models import AuditEvent
from store.models import utcnow
from store.repositories import ApprovalRepository
from store.switch import SwitchRepository, SwitchState
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run
from tests.agent_runtime.test_gate import SEND_ARGS, approved_and_resuming, config
from tests.store.test_audit_shards import _wait_until_another_backend_waits_for_a_lock

ADMIN = Actor("U0OPS1")
ESCALATION = "C0ESCALATE"


class Announced(NullNotifier):
    def __init__(self) -> None:
        self.lines: list[tuple[SwitchState, str]] = []

    def execution_switched(self, state: SwitchState, *, channel: str, team_id: str | None) -> None:
        self.lines.append((state, channel))


@pytest.fixture
def env(tmp_path):  # type: ignore[no-untyped-def]
    return make_env(tmp_path)


def switch_of(env, *, escalation: str | None = ESCALATION) -> tuple[KillSwitch, Announced]:  # type: ignore[no-untyped-def]
    policy: Policy = env.policy
    if escalation is not None:
        defaults = policy.defaults.model_copy(update={"escalation_channel": escalation})
        policy = policy.model_copy(update={"defaults": defaults})
    told = Announced()
    switch = KillSwitch(
        db=env.db,
        policy=policy,
        notifier=told,
        usergroup_members=lambda _group: frozenset(),
        clock=utcnow,
    )
    return switch, told


def events(env, *kinds: str) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with env.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind.in_(kinds))))


def test_only_admins_pause_and_each_flip_is_audited_and_announced(env):
    switch, told = switch_of(env)
    refused = switch.pause(REVIEWER, reason="why not")
    assert refused.outcome is SwitchOutcome.NOT_ALLOWED and not refused.state.paused
    assert told.lines == []

    paused = switch.pause(ADMIN, reason="incident 42")
    assert paused.outcome is SwitchOutcome.PAUSED
    assert (paused.state.paused, paused.state.reason, paused.state.changed_by) == (
        True,
        "incident 42",
        ADMIN.user_id,
    )
    assert switch.pause(ADMIN, reason="again").outcome is SwitchOutcome.ALREADY_PAUSED
    assert switch.resume(ADMIN).outcome is SwitchOutcome.RESUMED
    assert switch.resume(ADMIN).outcome is SwitchOutcome.ALREADY_RUNNING

    assert [(s.paused, channel) for s, channel in told.lines] == [
        (True, ESCALATION),
        (False, ESCALATION),
    ]
    audited = events(env, "execution_paused", "execution_resumed", "execution_switch_refused")
    assert [(e.kind, e.actor_id, e.reason) for e in audited] == [
        ("execution_switch_refused", REVIEWER.user_id, "not_allowed"),
        ("execution_paused", ADMIN.user_id, "incident 42"),
        ("execution_resumed", ADMIN.user_id, None),
    ]


def test_an_operator_at_the_command_line_needs_no_slack_role(env):
    switch, _told = switch_of(env, escalation=None)
    assert switch.pause("cli:ops", reason=None).outcome is SwitchOutcome.PAUSED
    assert switch.state().changed_by == "cli:ops"


def test_while_paused_nothing_is_approved_but_a_reject_is_recorded(env):
    switch, _told = switch_of(env)
    _run, action_id = paused_run(env)
    switch.pause(ADMIN, reason="incident")
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").refusal is (
        Refusal.EXECUTION_PAUSED
    )
    assert env.workspace.effects() == []
    rejected = decide(
        env, action_id=action_id, actor=REVIEWER, decision="reject", message="not now"
    )
    assert rejected.refusal is None


def test_an_approval_given_before_the_pause_does_not_run_during_it(on_both):
    """Defense in depth: the gate checks the switch where the effect happens, whatever the
    approval record says; the thread is told why (on PostgreSQL the switch comes with the
    run's row, in one statement)."""
    env = on_both
    switch, _told = switch_of(env)
    run_id, _action = paused_run(env)
    approved_and_resuming(env, run_id)
    switch.pause(ADMIN, reason="incident 42")
    ran: list[str] = []
    with pytest.raises(GateRefused, match="gated execution is paused by U0OPS1: incident 42"):
        env.gate.run(
            config(run_id),
            tool_name="send_external_message",
            args=SEND_ARGS,
            effect=lambda: ran.append("x") or "sent",
        )
    assert ran == []
    assert [reason for _run, _tool, reason in env.notes.blocked] == [
        "gated execution is paused by U0OPS1: incident 42"
    ]

    switch.resume(ADMIN)
    result = env.gate.run(
        config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=lambda: "sent"
    )
    assert result == "sent"


def test_a_workspace_section_decides_who_administers_the_switch_there(env):
    """Installed in several workspaces, ``admins`` is the workspace's own when its section names
    it: the switch asks the same role as a cancel does, not the top-level one."""
    section = {"T0WSB": {"roles": {"admins": {"users": ["U0BOPS"]}}}}
    env.policy = Policy.model_validate({**env.policy.model_dump(by_alias=True), "teams": section})
    switch, _ = switch_of(env)
    top_level_admin_in_b = Actor(ADMIN.user_id, "T0WSB")
    assert switch.pause(top_level_admin_in_b, reason="x").outcome is SwitchOutcome.NOT_ALLOWED
    assert switch.pause(Actor("U0BOPS", "T0WSB"), reason="x").outcome is SwitchOutcome.PAUSED


def test_a_pause_landing_after_the_resume_was_claimed_stops_the_effect_and_says_so(
    env, monkeypatch
):
    """The last approval claimed the resume; the pause lands before the tool runs. Nothing
    runs, the approval is not left to be spent after the resume, and the thread hears why."""
    from agent_runtime import resume

    switch, _told = switch_of(env)
    run_id, action_id = paused_run(env)
    reached = resume.fault_point

    def pause_after_claim(name: str) -> None:
        if name == "after_claim":
            switch.pause(ADMIN, reason="incident 7")
        reached(name)

    monkeypatch.setattr(resume, "fault_point", pause_after_claim)
    assert decide(env, action_id=action_id, actor=REVIEWER, decision="approve").completed
    assert env.workspace.effects() == []
    assert [reason for _run, _tool, reason in env.notes.blocked] == [
        "gated execution is paused by U0OPS1: incident 7"
    ]
    (finished,) = env.notes.finished
    assert finished.id == run_id and "paused by U0OPS1: incident 7" in str(finished.result_text)
    switch.resume(ADMIN)
    with pytest.raises(GateRefused):
        env.gate.run(config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=str)
    assert env.workspace.effects() == []


def test_on_postgresql_a_pause_cannot_commit_while_a_grant_is_being_taken(
    tmp_path, migrated_pg_url, monkeypatch
):
    """The gate holds the switch's row (shared) from its check until the grant commits: a pause
    from another connection in that window waits (here: times out), so no grant is taken
    under a pause that committed before it."""
    from sqlalchemy import text, update
    from sqlalchemy.exc import OperationalError

    from store.control_models import ExecutionSwitch
    from store.executions import ExecutionRepository

    env = make_env(tmp_path, url=migrated_pg_url)
    try:
        run_id, _action = paused_run(env)
        approved_and_resuming(env, run_id)
        start = ExecutionRepository.start
        paused_meanwhile: list[bool] = []

        def start_while_someone_pauses(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            with env.db.engine.connect() as other:
                other.execute(text("SET lock_timeout = '200ms'"))
                try:
                    other.execute(update(ExecutionSwitch).values(paused=True))
                    paused_meanwhile.append(True)
                except OperationalError:
                    paused_meanwhile.append(False)
                other.rollback()
            return start(self, *args, **kwargs)

        monkeypatch.setattr(ExecutionRepository, "start", start_while_someone_pauses)
        result = env.gate.run(
            config(run_id), tool_name="send_external_message", args=SEND_ARGS, effect=lambda: "ok"
        )
        assert result == "ok" and paused_meanwhile == [False]
    finally:
        env.db.dispose()


def _request_locked(conn: Connection, action_id: str) -> None:
    conn.execute(
        text(
            "SELECT r.id FROM approval_requests r JOIN actions a ON a.request_id = r.id "
            "WHERE a.id = :a FOR UPDATE OF r"
        ),
        {"a": action_id},
    )


def test_a_pause_while_a_decision_waits_for_its_request_refuses_the_approval(
    migrated_pg_url, tmp_path
):
    """The decision holds the switch (shared) only once it holds its request's row: a pause
    committed while it waits does not wait for it, and the decision sees the pause."""
    env = make_env(tmp_path, url=migrated_pg_url)
    switch, _told = switch_of(env)
    _run, action_id = paused_run(env)
    decided: list[DecisionResult] = []
    paused: list[SwitchOutcome] = []
    decision = threading.Thread(
        target=lambda: decided.append(
            decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
        )
    )
    pause = threading.Thread(
        target=lambda: paused.append(switch.pause(ADMIN, reason="incident").outcome)
    )
    try:
        with env.db.engine.connect() as holder:
            _request_locked(holder, action_id)
            decision.start()
            _wait_until_another_backend_waits_for_a_lock(env.db)
            pause.start()
            pause.join(timeout=10)
            assert not pause.is_alive(), "the pause waited for a decision that holds nothing"
            holder.rollback()
        decision.join(timeout=30)
        assert paused == [SwitchOutcome.PAUSED]
        assert [r.refusal for r in decided] == [Refusal.EXECUTION_PAUSED]
        assert env.workspace.effects() == []
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_decision_holds_the_switch_until_it_commits(migrated_pg_url, tmp_path):
    """Once its request is locked, the decision's transaction holds the switch: a pause
    commits before it (and is seen) or after it, never in between."""
    env = make_env(tmp_path, url=migrated_pg_url)
    _run, action_id = paused_run(env)
    try:
        with env.db.transaction() as s:
            request = ApprovalRepository(s).get_by_action(
                action_id, for_update=True, hold_switch=True
            )
            assert request is not None
            assert not SwitchRepository(s).state(hold=True).paused
            with env.db.engine.connect() as other:
                other.execute(text("SET lock_timeout = '200ms'"))
                with pytest.raises(OperationalError, match="lock timeout"):
                    other.execute(text("UPDATE execution_switch SET paused = true"))
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_database_without_the_switch_row_decides_as_running(migrated_pg_url, tmp_path):
    env = make_env(tmp_path, url=migrated_pg_url)
    _run, action_id = paused_run(env)
    try:
        with env.db.engine.begin() as conn:
            conn.execute(text("DELETE FROM execution_switch"))
        result = decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
        assert result.refusal is None and result.completed
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_only_a_decision_that_would_approve_holds_the_switch(migrated_pg_url, tmp_path):
    """A reject would be recorded even while paused, so it never looks at the switch: a pause
    does not wait behind a queue of rejects."""
    env = make_env(tmp_path, url=migrated_pg_url)
    _run, action_id = paused_run(env)
    sent: list[str] = []
    try:
        event.listen(env.db.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
        rejected = decide(
            env, action_id=action_id, actor=REVIEWER, decision="reject", message="not now"
        )
        assert rejected.refusal is None
        assert sent and not [q for q in sent if "execution_switch" in q]
    finally:
        close_checkpointer(env.runtime.checkpointer)
        env.db.dispose()


def test_a_pause_whose_reason_the_store_cannot_hold_as_typed_still_pauses(on_both):
    """The emergency stop must never fail on what an operator typed (PostgreSQL refuses a NUL
    in text): the reason is kept cleaned."""
    switch, _told = switch_of(on_both)
    assert switch.pause(ADMIN, reason="incident\x00 7").outcome is SwitchOutcome.PAUSED
    assert switch.state().reason == "incident\ufffd 7"
