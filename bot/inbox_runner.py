"""Working on one claimed inbox item: its decision work under a lease renewed meanwhile, then
done, tried again a little later, or given up (the user told, the drop audited).

The item's id, passed to the engine as the decision's idempotency key, keeps a redo after a
crash or a lost lease from recording a second decision.
"""

from __future__ import annotations

import datetime as dt
import logging
from contextlib import AbstractContextManager
from dataclasses import replace

from pydantic import ValidationError

from agent_runtime import trace
from agent_runtime.renewals import Renewals
from bot.errors import GAVE_UP, UNEXPECTED, user_message
from bot.handoff import Claimed
from bot.listeners.actions.cancel import cancel_run
from bot.listeners.actions.decide import approve_all, decide, decide_and_refresh
from bot.metrics import clicked_at
from bot.services import BotServices
from bot.work import Work
from store.inbox import InboxRepository
from store.inbox_models import InboxKind, InboxStatus
from store.models import utcnow

logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 5
"""Claims of one item before it is given up (each one a worker that died working on it)."""
RETRY_AFTER = dt.timedelta(seconds=5)
"""How long a failed item waits before it is tried again."""


def attempt_key(item_id: int) -> str:
    return f"inbox:{item_id}"


def process(services: BotServices, kind: str, work: Work, *, key: str) -> None:
    """Do one item's work: the same functions the listeners used to run in the pool."""
    if kind == InboxKind.APPROVE:
        decide_and_refresh(services, work, attempt_key=key)
    elif kind == InboxKind.APPROVE_ALL:
        approve_all(services, work, attempt_key=key)
    elif kind == InboxKind.CANCEL:
        cancel_run(services, work, attempt_key=key)
    elif kind == InboxKind.DECIDE:
        assert work.action_id is not None
        decide(
            services,
            work.action_id,
            work.seen,
            work.who,
            None,
            decision=work.decision,
            message=work.message,
            edited_args=work.edited_args,
            attempt_key=key,
        )
    else:
        raise ValueError(f"unknown inbox item kind {kind!r}")


class InboxRunner:
    """Works on the items a pool claimed under ``owner``, each under a ``lease`` it renews."""

    def __init__(self, services: BotServices, *, owner: str, lease: dt.timedelta) -> None:
        self.services = services
        self.db = services.engine.db
        self.owner = owner
        self.lease = lease
        self.leases = Renewals(every=lease.total_seconds() / 3, name="inbox-leases")

    def handle(self, claimed: Claimed) -> None:
        """Work on an item claimed under ``owner``: done, tried again later, or given up."""
        try:
            work = Work.model_validate(claimed.payload)
        except ValidationError as exc:
            # Nobody to tell: the payload does not say who. Kept, failed, for the operators.
            logger.error("inbox item %s is unreadable, not worked on: %s", claimed.id, exc)
            self.services.metrics.inc("inbox_unreadable")
            self._finish(claimed.id, InboxStatus.FAILED, f"unreadable: {exc}"[:2000])
            return
        if claimed.attempts > MAX_ATTEMPTS:
            self._give_up(claimed.id, work, f"gave up after {MAX_ATTEMPTS} claims")
            return
        self._work(claimed, work)

    def _work(self, claimed: Claimed, work: Work) -> None:
        """Worked on with the item's ids bound to every log line, and its click time known to
        the resume it may start (for the click-to-resume histogram)."""
        clicked = clicked_at.set(claimed.created_at)
        try:
            with trace.bind(
                inbox_item=claimed.id,
                actor=work.actor.user_id,
                request_id=work.request_id,
                action_id=work.action_id,
                run_id=work.run_id,
            ):
                self._attempt(claimed, work)
        finally:
            clicked_at.reset(clicked)

    def _attempt(self, claimed: Claimed, work: Work) -> None:
        """An unexpected failure is tried again a little later (a redo decides nothing twice);
        after ``MAX_ATTEMPTS``, or at once for a known cause, the user is told and the drop is
        audited."""
        try:
            with self._leased(claimed.id):  # renewed while it waits its turn too
                if self.services.ack_first.wait_turn():  # a burst of requests is being answered
                    self.services.metrics.inc("inbox_waits_for_acks")
                process(self.services, claimed.kind, work, key=attempt_key(claimed.id))
        except Exception as exc:
            logger.exception("%s by %s failed", work.what, work.actor.user_id)
            error = f"{type(exc).__name__}: {exc}"[:2000]
            told = user_message(exc)
            if told != UNEXPECTED:  # a known cause, which trying again does not change
                self._give_up(claimed.id, work, error, told=told)
                return
            if claimed.attempts >= MAX_ATTEMPTS:
                self._give_up(claimed.id, work, error)
                return
            with self.db.single() as s:
                InboxRepository(s).retry_later(
                    claimed.id, owner=self.owner, at=utcnow() + RETRY_AFTER, error=error
                )
            return
        self._finish(claimed.id, InboxStatus.DONE, None)

    def _give_up(self, item_id: int, work: Work, error: str, *, told: str = GAVE_UP) -> None:
        self._finish(item_id, InboxStatus.FAILED, error)
        self.services.metrics.inc("inbox_given_up")
        self.services.dropped(replace(work.drop(), notice=told, reason="failed"), tell=True)

    def _finish(self, item_id: int, status: InboxStatus, error: str | None) -> None:
        with self.db.single() as s:
            if not InboxRepository(s).finish(item_id, owner=self.owner, status=status, error=error):
                logger.warning("inbox item %s was claimed again before it was finished", item_id)

    def _leased(self, item_id: int) -> AbstractContextManager[None]:
        """Renew the item's lease while it is worked on, so a slow decision is not redone."""

        def renew() -> bool:
            with self.db.single() as s:
                return InboxRepository(s).renew(
                    item_id, owner=self.owner, until=utcnow() + self.lease
                )

        def lost() -> None:
            # Another worker took it over (this one was presumed dead): its redo of the same
            # attempt records nothing twice. Renewing cannot win it back.
            logger.warning("inbox item %s was taken over while being worked on", item_id)
            self.services.metrics.inc("inbox_lease_lost")

        return self.leases.kept(item_id, renew, lost=lost)
