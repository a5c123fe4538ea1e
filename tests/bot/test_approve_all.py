"""Every refused "Approve all" is audited as one attempt, whatever refused it."""

from __future__ import annotations

from sqlalchemy import select

from agent_runtime.authorization import Refusal
from agent_runtime.run_end import CLOSED_WITH_RUN
from bot.errors import REFUSALS
from bot.ids import ActionId, choice_value
from bot.sandbox import people
from bot.sandbox.driver import Button
from store.audit_models import AuditEvent
from store.models import Decision
from store.repositories import ApprovalRepository
from tests.bot.flows import DELETE, SEND, button, ephemeral_for, start_run
from tests.conftest import Harness

APPROVE_ALL = "Approve all I may approve"


def refused_approve_all(h: Harness) -> list[tuple[str | None, str | None, str | None]]:
    assert h.bot.settle(timeout=60)
    with h.bot.db.transaction() as s:
        events = s.scalars(select(AuditEvent).where(AuditEvent.kind == "decision_refused")).all()
        return [
            (e.actor_id, e.request_id, e.reason)
            for e in events
            if e.detail.get("decision") == "approve_all"
        ]


def test_approve_all_of_an_unknown_approval_is_audited(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, f"{SEND}\n{DELETE}")
    real = button(card, APPROVE_ALL)
    forged = Button(real.block_id, ActionId.APPROVE_ALL, choice_value("apr_missing", "0" * 32), "x")

    h.driver.click(user=people.SECURITY, message=card, button=forged)

    assert refused_approve_all(h) == [(people.SECURITY, None, Refusal.UNKNOWN_APPROVAL.value)]
    assert ephemeral_for(h, people.SECURITY) == REFUSALS[Refusal.UNKNOWN_APPROVAL]


def test_approve_all_by_someone_who_may_approve_nothing_is_audited_as_one_attempt(
    serve_bot, sqlite_url
):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, f"{SEND}\n{DELETE}")
    request_id = button(card, APPROVE_ALL).value.split(":")[0]

    h.driver.click(user=people.OUTSIDER, message=card, button=button(card, APPROVE_ALL))

    assert ephemeral_for(h, people.OUTSIDER).startswith("You approved 0 action(s); 2 need")
    assert refused_approve_all(h) == [(people.OUTSIDER, request_id, Refusal.NOT_AN_APPROVER.value)]
    with h.bot.db.transaction() as s:
        assert s.scalars(select(Decision)).all() == []


def test_each_approve_all_click_is_one_attempt_in_the_audit(serve_bot, sqlite_url):
    """The per-action refusals of one click name that click, so an auditor sees one attempt
    (not two separate Approve clicks); a second click is another attempt."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, f"{SEND}\n{DELETE}")
    for count in (1, 2):
        h.driver.click(user=people.OUTSIDER, message=card, button=button(card, APPROVE_ALL))
        ephemeral_for(h, people.OUTSIDER, count)
    assert h.bot.settle(timeout=60)
    with h.bot.db.transaction() as s:
        events = s.scalars(select(AuditEvent).where(AuditEvent.kind == "decision_refused")).all()
        rows = [(e.detail.get("attempt"), e.detail, e.action_id) for e in events]
    attempts: dict[str | None, list[tuple[str | None, str, bool]]] = {}
    for attempt, detail, action_id in rows:
        attempts.setdefault(attempt, []).append(
            (detail.get("via"), detail["decision"], action_id is not None)
        )
    assert None not in attempts and len(attempts) == 2, attempts
    for group in attempts.values():
        assert sorted(group) == [
            (ActionId.APPROVE_ALL, "approve", True),
            (ActionId.APPROVE_ALL, "approve", True),
            (ActionId.APPROVE_ALL, "approve_all", False),
        ]


def test_approve_all_on_a_card_closed_since_it_was_drawn_says_why(serve_bot, sqlite_url):
    """Its run ended (here: the request closed unresumed) while the card still showed its
    buttons: the reviewer is told it was closed, not that the card changed."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, f"{SEND}\n{DELETE}")
    request_id = button(card, APPROVE_ALL).value.split(":")[0]
    with h.bot.db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        assert request is not None
        ApprovalRepository(s).finish(request, status="invalidated", outcome=CLOSED_WITH_RUN)

    h.driver.click(user=people.SECURITY, message=card, button=button(card, APPROVE_ALL))

    assert ephemeral_for(h, people.SECURITY) == REFUSALS[Refusal.REQUEST_CLOSED]
    assert refused_approve_all(h) == [(people.SECURITY, request_id, Refusal.REQUEST_CLOSED.value)]
    with h.bot.db.transaction() as s:
        assert s.scalars(select(Decision)).all() == []
