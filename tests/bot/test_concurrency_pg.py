"""Exactly once on PostgreSQL, the production store: many reviewers click at the same moment."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from bot.errors import REFUSALS
from bot.sandbox import people
from store.models import AuditEvent, Decision
from tests.bot.flows import DELETE, SEND, button, result_message, start_run

REVIEWERS = [people.RELEASE_MANAGER, people.RELEASE_MANAGER_2, people.SECURITY]


def test_twenty_concurrent_approvals_resume_once(serve_bot, pg_url):
    h = serve_bot(pg_url)
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


def test_concurrent_approvals_of_one_action_in_a_batch_record_one_decision(serve_bot, pg_url):
    """The request stays pending after the first approval, so only the action's own state can
    refuse the others: it must be read fresh under the lock."""
    h = serve_bot(pg_url)
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
