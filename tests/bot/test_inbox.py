"""A stored click whose worker died after deciding, before marking it done, is claimed again
by another worker once the lease ran out: the redo records no second decision and tells the
reviewer nothing wrong (no "already decided"). Real PostgreSQL."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import threading

import pytest
from sqlalchemy import select, update

from bot.inbox import InboxWorkers
from bot.sandbox import people
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from store.audit_models import AuditEvent
from store.inbox_models import InboxItem, InboxStatus
from store.models import Decision, utcnow
from tests.bot.flows import (
    DELETE,
    SEND,
    button,
    open_modal,
    result_message,
    settled,
    start_run,
)
from tests.bot.test_crash_recovery import WAIT, approve, check_the_outcome, start_and_find_card
from tests.conftest import Harness
from tests.wire import watching

APPROVE_ALL = "Approve all I may approve"


class Crash(BaseException):
    """The worker's process dies here: nothing after it runs, not even error handling."""


def die_before_done(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work on the stored item as a worker that dies right after the decision work."""

    def crash(*_args: object, **_kwargs: object) -> None:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(h.bot.inbox.runner, "_finish", crash)
        with pytest.raises(Crash):
            h.bot.inbox.run_once()


def lease_runs_out(h: Harness) -> None:
    """The dead worker's lease ends (without waiting for the clock)."""
    with h.bot.db.transaction() as s:
        s.execute(update(InboxItem).values(lease_until=utcnow() - dt.timedelta(seconds=1)))


def another_worker_redoes_it(h: Harness) -> None:
    survivor = InboxWorkers(h.bot.services, threads=1, lease=dt.timedelta(minutes=1))
    assert survivor.run_once(), "the dead worker's item is claimed again"
    assert not survivor.run_once()
    with h.bot.db.transaction() as s:
        [(status, attempts)] = s.execute(select(InboxItem.status, InboxItem.attempts)).all()
    assert (status, attempts) == (InboxStatus.DONE, 2)


def recorded(h: Harness) -> tuple[int, list[str | None]]:
    with h.bot.db.transaction() as s:
        count = len(s.scalars(select(Decision)).all())
        refused = s.scalars(
            select(AuditEvent.reason).where(AuditEvent.kind == "decision_refused")
        ).all()
        return count, list(refused)


def test_a_redone_approve_records_one_decision_and_runs_the_tool_once(
    serve_bot, migrated_pg_url, monkeypatch
):
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert h.bot.listeners.wait_idle(timeout=60)

    die_before_done(h, monkeypatch)
    assert recorded(h) == (1, []), "decided before the crash"
    lease_runs_out(h)
    another_worker_redoes_it(h)

    result_message(h, root)
    assert recorded(h) == (1, [])
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
    assert h.state.ephemerals_for(people.RELEASE_MANAGER) == []


def test_a_redone_reject_submission_records_one_decision(serve_bot, migrated_pg_url, monkeypatch):
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    root, card = start_run(h, SEND)
    modal = open_modal(h, people.RELEASE_MANAGER, card, "Reject")
    values = {"reject_reason": {"reason": "Not now"}}
    h.driver.submit_view(user=people.RELEASE_MANAGER, view_id=modal.id, values=values)
    assert h.bot.listeners.wait_idle(timeout=60)

    die_before_done(h, monkeypatch)
    lease_runs_out(h)
    another_worker_redoes_it(h)

    assert "Not now" in result_message(h, root).text
    assert recorded(h) == (1, [])
    assert h.workspace.effects() == []
    assert h.state.ephemerals_for(people.RELEASE_MANAGER) == []


def test_an_approve_all_cut_short_by_a_crash_is_finished_by_the_redo(
    serve_bot, migrated_pg_url, monkeypatch
):
    """Killed after the first of two decisions: the redo counts that one as part of what the
    card showed (the card changed since) and approves the second."""
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    root, card = start_run(h, f"{SEND}\n{DELETE}")
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, APPROVE_ALL))
    assert h.bot.listeners.wait_idle(timeout=60)

    engine, calls = h.bot.services.engine, []
    decide = engine.decide

    def dies_on_the_second(**kw: object):  # type: ignore[no-untyped-def]
        calls.append(kw["action_id"])
        if len(calls) == 2:
            raise Crash
        return decide(**kw)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(engine, "decide", dies_on_the_second)
        with pytest.raises(Crash):
            h.bot.inbox.run_once()
    assert recorded(h) == (1, [])
    lease_runs_out(h)
    another_worker_redoes_it(h)

    result_message(h, root)
    assert recorded(h) == (2, [])
    assert h.state.ephemerals_for(people.RELEASE_MANAGER) == []


def test_approval_bot_worker_decides_what_a_serve_without_workers_stored(migrated_pg_url, tmp_path):
    """``serve`` with INBOX_WORKERS=false only stores the click; a separate
    ``approval-bot worker`` process (woken by NOTIFY, or its poll) decides it."""
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    workspace = tmp_path / "workspace"
    env = bot_env(sandbox, migrated_pg_url, workspace, INBOX_WORKERS="false")
    server = BotProcess(env, sandbox)
    worker = None
    try:
        root, card = start_and_find_card(server, sandbox.state)
        approve(server, card)
        with (tmp_path / "worker.log").open("w") as log:
            worker = subprocess.Popen([sys.executable, "-m", "bot", "worker"], env=env, stderr=log)
        sandbox.state.wait_for(lambda: settled(sandbox.state, root, card=card), timeout=WAIT)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
        server.stop()
        sandbox.stop()
    check_the_outcome(sandbox.state, root, card=card, pg_url=migrated_pg_url, ws=workspace)


def test_a_worker_whose_item_was_taken_over_stops_renewing_and_says_so(
    serve_bot, migrated_pg_url, monkeypatch
):
    """A worker presumed dead (its lease ran out) finds at its next renewal that another
    took the item: it stops renewing, counts it, and the redo decides nothing twice."""
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    _root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    lost = threading.Event()
    count = h.bot.services.metrics.inc

    def counted(name: str, amount: int = 1) -> None:
        count(name, amount)
        if name == "inbox_lease_lost":
            lost.set()

    def taken_over_while_working(*_args: object, **_kwargs: object) -> None:
        with h.bot.db.transaction() as s:
            s.execute(update(InboxItem).values(claimed_by="another-worker"))
        assert lost.wait(timeout=30), "the renewal never noticed"

    monkeypatch.setattr(h.bot.services.metrics, "inc", counted)
    monkeypatch.setattr("bot.inbox_runner.process", taken_over_while_working)
    slow = InboxWorkers(h.bot.services, threads=1, lease=dt.timedelta(seconds=0.3))
    assert slow.run_once()
    assert h.bot.services.metrics.count("inbox_lease_lost") == 1
    with h.bot.db.transaction() as s:
        assert s.scalar(select(InboxItem.status)) == InboxStatus.CLAIMED  # not finished by it


def test_on_postgresql_a_worker_claims_and_finishes_an_item_each_in_its_own_statement(
    serve_bot, migrated_pg_url
):
    """The claim and the finish are single statements: each its own transaction, with no
    BEGIN and COMMIT round trips around it."""
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    _root, card = start_run(h, SEND)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert h.bot.listeners.wait_idle(timeout=60)
    with watching(h.bot.db) as wire:
        assert h.bot.inbox.run_once()
    assert wire.state_after("UPDATE inbox_items", "attempts=(inbox_items.attempts") == "I"
    assert wire.state_after("UPDATE inbox_items", "finished_at=") == "I"
    assert recorded(h) == (1, [])


def test_items_worked_one_after_another_start_no_thread_of_their_own_for_leases(
    serve_bot, migrated_pg_url, monkeypatch
):
    """An item's lease and its request's claim are renewed while the item is worked on, from
    a thread each that every item shares: a thread started and joined per click costs every
    click, and more on a busy interpreter."""
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    for _ in range(3):
        _root, card = start_run(h, SEND)
        h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    workers = InboxWorkers(h.bot.services, threads=1, lease=dt.timedelta(minutes=1))
    started: list[list[str]] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        target = getattr(thread, "_target", None)  # the function the thread runs
        if getattr(target, "__module__", "").startswith(("agent_runtime.", "bot.")):
            started[-1].append(thread.name)  # ours: not a pool's worker, nor the sandbox's
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    for _ in range(3):
        started.append([])
        assert workers.run_once()
    assert not workers.run_once()
    assert recorded(h) == (3, [])
    # The first item may start what every later one shares; a later one, only the thread that
    # shows its card while it resumes.
    later = [name for names in started[1:] for name in names]
    assert later and all(name.startswith("card-") for name in later), started
