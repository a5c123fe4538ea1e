"""Cancelling a run end to end over signed HTTP: the requester or an admin cancels, anyone else
is refused privately and audited, and a cancelled run never resumes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from sqlalchemy import select

from agent_runtime.cancel import CancelOutcome
from bot.errors import CANCEL_ANSWERS, REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from store.audit_models import AuditEvent
from store.models import ApprovalRequest, Decision, PendingSlot, Run, utcnow
from tests.bot.flows import SEND, button, card_header, card_now, ephemeral_for, result_message
from tests.bot.flows import start_run as start


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


def audit(h, kind: str) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == kind)))


def only_run(h) -> Run:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return s.scalars(select(Run)).one()


def test_the_requester_cancels_a_waiting_run_and_it_never_resumes(serve_bot, sqlite_url):
    clock = Clock()
    h = serve_bot(sqlite_url, clock=clock)
    root, card = start(h, SEND)
    approve, cancel = button(card, "Approve"), button(card, "Cancel run")
    assert cancel.value == only_run(h).id, "the button names the run, nothing else"

    h.driver.click(user=people.REQUESTER, message=card, button=cancel)

    line = result_message(h, root)
    assert line.text.startswith(f"Run cancelled by <@{people.REQUESTER}>")
    closed = card_now(h, card)
    assert buttons(closed) == [] and card_header(closed) == "Cancelled: nothing ran"
    assert f"Cancelled by <@{people.REQUESTER}> at <!date^" in json.dumps(closed.blocks)
    h.state.wait_for(lambda: not buttons(h.state.current(root)))  # the first message too
    run = only_run(h)
    assert (run.status, run.cancelled_by) == ("cancelled", people.REQUESTER)
    assert run.cancelled_at is not None
    [event] = audit(h, "run_cancelled")
    assert (event.actor_id, event.run_id, event.outcome) == (people.REQUESTER, run.id, "allowed")
    with h.bot.db.transaction() as s:
        assert s.scalars(select(ApprovalRequest.status)).all() == ["cancelled"]
        assert s.scalars(select(PendingSlot)).all() == []

    # A reviewer's click on the old card is refused, and nothing ever runs: not the click,
    # not expiry, not the reconciler.
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS["run_cancelled"]
    # The cancel's worker remembers the thread was told just after telling it; the day's jump
    # below skips the grace that keeps the reconciler from posting a result meanwhile.
    assert h.bot.settle(timeout=30)
    clock.now += dt.timedelta(days=1)
    h.bot.engine.sweep()
    h.bot.engine.reconcile()
    assert h.bot.settle(timeout=30)
    assert h.workspace.effects() == []
    with h.bot.db.transaction() as s:
        assert s.scalars(select(Decision)).all() == []
    assert h.bot.runtime.state(run.id).interrupts, "the checkpoint was never resumed"
    assert only_run(h).status == "cancelled"
    assert audit(h, "resumed") == [] and audit(h, "expired") == []

    # Cancelling again changes nothing, and says who cancelled first.
    h.driver.click(user=people.REQUESTER, message=card, button=cancel)
    again = ephemeral_for(h, people.REQUESTER)
    assert again.startswith(f"This run was already cancelled by <@{people.REQUESTER}>")
    assert len(audit(h, "run_cancelled")) == 1
    assert [e.reason for e in audit(h, "run_cancel_refused")] == ["already_cancelled"]
    assert [m.text for m in h.state.thread(root.channel, root.ts)].count(line.text) == 1


def test_an_admin_may_cancel_and_anyone_else_is_refused_and_audited(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start(h, SEND)
    cancel_on_root = button(h.state.current(root), "Cancel run")

    h.driver.click(user=people.RELEASE_MANAGER, message=root, button=cancel_on_root)

    told = ephemeral_for(h, people.RELEASE_MANAGER)
    assert told == CANCEL_ANSWERS[CancelOutcome.NOT_ALLOWED]
    [refused] = audit(h, "run_cancel_refused")
    assert (refused.actor_id, refused.reason, refused.outcome) == (
        people.RELEASE_MANAGER,
        "not_allowed",
        "refused",
    )
    assert only_run(h).status == "waiting"
    assert "Approve" in [b.text for b in buttons(card_now(h, card))]
    assert not [m for m in h.state.thread(root.channel, root.ts) if m.text.startswith("Run ")]

    h.driver.click(user=people.ADMIN, message=root, button=cancel_on_root)

    assert result_message(h, root).text.startswith(f"Run cancelled by <@{people.ADMIN}>")
    assert card_header(card_now(h, card)) == "Cancelled: nothing ran"
    [event] = audit(h, "run_cancelled")
    assert (event.actor_id, event.detail["as"]) == (people.ADMIN, "admins")
    assert h.workspace.effects() == []


def test_cancel_after_the_run_finished_says_it_is_no_longer_waiting(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start(h, SEND)
    cancel = button(card, "Cancel run")
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    finished = result_message(h, root)
    assert finished.text.startswith("Run finished")
    h.state.wait_for(lambda: not buttons(h.state.current(root)))  # no Cancel once finished

    h.driver.click(user=people.REQUESTER, message=card, button=cancel)

    assert ephemeral_for(h, people.REQUESTER) == CANCEL_ANSWERS[CancelOutcome.FINISHED]
    assert only_run(h).status == "completed"
    assert [e.reason for e in audit(h, "run_cancel_refused")] == ["finished"]
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_a_forged_run_id_is_refused_and_audited(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start(h, SEND)
    forged = dataclasses.replace(button(card, "Cancel run"), value="run_" + "0" * 32)
    h.driver.click(user=people.ADMIN, message=card, button=forged)
    assert ephemeral_for(h, people.ADMIN) == CANCEL_ANSWERS[CancelOutcome.UNKNOWN_RUN]
    assert [e.reason for e in audit(h, "run_cancel_refused")] == ["unknown_run"]
    assert only_run(h).status == "waiting"


def test_a_cancel_while_the_run_is_working_is_answered_not_queued(
    serve_bot, migrated_pg_url, monkeypatch
):
    """A run busy in a long step holds its lock; a Cancel waits a few seconds at most, then
    asks the user to try again (audited), and leaves the run as it was; the inbox worker is
    free again."""
    monkeypatch.setattr("agent_runtime.engine.CANCEL_WAIT_SECONDS", 0.3)
    h = serve_bot(migrated_pg_url)
    root, card = start(h, SEND)
    run = only_run(h)
    with h.bot.engine.locks.hold(run.id):  # the agent or a tool is running
        h.driver.click(user=people.REQUESTER, message=card, button=button(card, "Cancel run"))
        assert ephemeral_for(h, people.REQUESTER) == CANCEL_ANSWERS[CancelOutcome.BUSY]
    [refused] = audit(h, "run_cancel_refused")
    assert (refused.actor_id, refused.reason, refused.run_id) == (people.REQUESTER, "busy", run.id)
    assert only_run(h).status == "waiting"
    h.driver.click(user=people.REQUESTER, message=card, button=button(card, "Cancel run"))
    line = result_message(h, root)  # once the run waits again, a Cancel goes through
    assert line.text.startswith(f"Run cancelled by <@{people.REQUESTER}>")
