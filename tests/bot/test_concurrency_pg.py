"""Exactly once on PostgreSQL, the production store: many reviewers click at the same moment."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from agent_runtime.cancel import CancelOutcome
from bot.errors import CANCEL_ANSWERS, REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import Button
from bot.sandbox.state import Message
from store.audit_models import AuditEvent
from store.models import Decision, Run
from tests.bot.flows import (
    DELETE,
    SEND,
    button,
    card_header,
    result_message,
    results_in,
    start_run,
)

REVIEWERS = [people.RELEASE_MANAGER, people.RELEASE_MANAGER_2, people.SECURITY]
PENDING_HEADER = "Approval needed: 1 action waiting"


def test_twenty_concurrent_approvals_resume_once(serve_bot, migrated_pg_url):
    h = serve_bot(migrated_pg_url)
    root, card = start_run(h, SEND)
    approve = button(card, "Approve")
    clickers = [REVIEWERS[i % len(REVIEWERS)] for i in range(20)]
    barrier = threading.Barrier(len(clickers))

    def click(user: str) -> int:
        barrier.wait()
        return h.driver.click(user=user, message=card, button=approve).status

    with ThreadPoolExecutor(max_workers=len(clickers)) as pool:
        statuses = list(pool.map(click, clickers))

    assert statuses == [200] * 20
    result_message(h, root)
    told = h.state.wait_for(lambda: len(h.state.ephemerals) >= 19 and list(h.state.ephemerals))
    assert len(told) == 19
    assert {e.text for e in told} == {REFUSALS["already_decided"]}
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
    with h.bot.db.transaction() as s:
        kinds = s.scalars(select(AuditEvent.kind)).all()
        decisions = s.scalars(select(Decision)).all()
    assert kinds.count("resumed") == 1
    assert kinds.count("resume_claimed") == 1
    assert kinds.count("decision_refused") == 19
    assert len(decisions) == 1


def test_concurrent_approvals_of_one_action_in_a_batch_record_one_decision(
    serve_bot, migrated_pg_url
):
    """The request stays pending after the first approval, so only the action's own state can
    refuse the others: it must be read fresh under the lock."""
    h = serve_bot(migrated_pg_url)
    _root, card = start_run(h, f"{SEND}\n{DELETE}")
    approve_first = button(card, "Approve", 0)
    clickers = [REVIEWERS[i % len(REVIEWERS)] for i in range(12)]
    barrier = threading.Barrier(len(clickers))

    def click(user: str) -> int:
        barrier.wait()
        return h.driver.click(user=user, message=card, button=approve_first).status

    with ThreadPoolExecutor(max_workers=len(clickers)) as pool:
        assert list(pool.map(click, clickers)) == [200] * len(clickers)
    h.state.wait_for(lambda: len(h.state.ephemerals) >= len(clickers) - 1)
    with h.bot.db.transaction() as s:
        assert len(s.scalars(select(Decision)).all()) == 1
    assert h.workspace.effects() == [], "the other action is still undecided"


def _race(h, *, late_cancel: bool) -> tuple[Message, Message, Button, int]:  # type: ignore[no-untyped-def]
    """Nine Approve clicks and the requester's Cancel at once; with ``late_cancel`` the Cancel
    waits until the card shows the approval was decided, so it races the resume instead."""
    root, card = start_run(h, SEND)
    approve, cancel = button(card, "Approve"), button(card, "Cancel run")
    clicks = [(REVIEWERS[i % len(REVIEWERS)], approve) for i in range(9)]
    clicks.append((people.REQUESTER, cancel))
    barrier = threading.Barrier(len(clicks))
    ran_before = len(h.workspace.effects())

    def click(pair: tuple[str, Button]) -> int:
        barrier.wait()
        if late_cancel and pair[1] is cancel:
            h.state.wait_for(lambda: card_header(h.state.current(card)) != PENDING_HEADER)
        return h.driver.click(user=pair[0], message=card, button=pair[1]).status

    with ThreadPoolExecutor(max_workers=len(clicks)) as pool:
        assert list(pool.map(click, clicks)) == [200] * len(clicks)
    return root, card, cancel, ran_before


def test_a_cancelled_run_never_resumes_even_if_an_approval_click_races_the_cancel(
    serve_bot, migrated_pg_url
):
    """Either the approval resumed the run to its end first (then the cancel answers that the
    run is no longer waiting), or the run is cancelled and the tool never ran, whatever was
    decided or claimed before. Rounds alternate: Cancel with the clicks, Cancel with the
    resume."""
    h = serve_bot(migrated_pg_url)
    seen: list[str] = []
    for round_ in range(6):
        told_before = len(h.state.ephemerals_for(people.REQUESTER))
        root, card, cancel, ran_before = _race(h, late_cancel=round_ % 2 == 1)
        line = result_message(h, root)
        assert h.bot.settle(timeout=60)
        ran = len(h.workspace.effects()) - ran_before
        run_id = cancel.value
        with h.bot.db.transaction() as s:
            status = s.scalar(select(Run.status).where(Run.id == run_id))
            kinds = s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run_id)).all()
            refused = s.scalars(
                select(AuditEvent.reason).where(
                    AuditEvent.run_id == run_id, AuditEvent.kind == "run_cancel_refused"
                )
            ).all()
        seen.append(status)
        if status == "cancelled":
            assert ran == 0, "a cancelled run's tool never runs"
            assert line.text.startswith(f"Run cancelled by <@{people.REQUESTER}>")
            assert "resumed" not in kinds and "tool_outcome" not in kinds
            assert kinds.count("run_cancelled") == 1 and refused == []
            assert h.bot.runtime.state(run_id).interrupts, "the checkpoint was never resumed"
            assert card_header(h.state.current(card)) == "Cancelled: nothing ran"
        else:
            assert status == "completed", status
            assert ran == 1 and kinds.count("resumed") == 1
            assert line.text.startswith("Run finished")
            assert "run_cancelled" not in kinds and refused == ["finished"]
            told = h.state.ephemerals_for(people.REQUESTER)[told_before:]
            assert [e.text for e in told] == [CANCEL_ANSWERS[CancelOutcome.FINISHED]]
        assert len(results_in(h.state, root)) == 1
    print("outcomes of the races:", seen)
