"""Everything the bot tells people, and the bookkeeping that makes it reliable: cards posted
and updated, results posted, expiry and reminder notices. Never inside a database transaction.

A post can fail, or reach Slack while its answer is lost (a timeout, a dropped connection, the
process dying before it stored the reference). A card's reference is therefore stored after the
post, in a short transaction of its own; a click on a card whose reference is not stored yet
brings it along (see ``decisions``), and ``retry_card_posts`` looks for a card before posting
again. What each card shows is remembered, so a card left out of date by a crash is redrawn.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from agent_runtime.card_updates import CardUpdates
from agent_runtime.digests import DigestPoster
from agent_runtime.faults import fault_point
from agent_runtime.notifier import MessageRef, Notifier
from agent_runtime.reach import ReviewerReach
from agent_runtime.run_results import RunResults
from agent_runtime.views import ApprovalView, Reviewers, RunView, approval_view
from store.db import Database
from store.locks import ThreadLocks
from store.maintenance import MaintenanceQueries
from store.repositories import (
    ApprovalRepository,
    AuditRepository,
    CardRepository,
)
from store.statuses import RequestStatus

logger = logging.getLogger(__name__)


class Announcer:
    def __init__(
        self,
        *,
        db: Database,
        notifier: Notifier,
        locks: ThreadLocks,
        reach: ReviewerReach | None = None,
        digests: DigestPoster | None = None,
    ) -> None:
        """``reach``: who to tell that a card needs them; ``None`` tells nobody.
        ``digests``: posts and redraws the digests of approvals reviewed in batches."""
        self.db = db
        self.notifier = notifier
        self.locks = locks
        self.reach = reach
        self.digests = digests
        self.cards = CardUpdates(db=db, notifier=notifier)
        self.results = RunResults(db=db, notifier=notifier)

    # Cards --------------------------------------------------------------------------------

    def post_card(self, request_id: str, *, look_first: bool = False) -> None:
        """Post the card of a pending request that has none, then remember where it is.

        ``look_first``: adopt a card already in the chat for this request instead of posting
        another. Callers hold the run's thread lock, so one process at a time posts a run's cards.
        """
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            if (
                request is None
                or request.status != RequestStatus.PENDING
                or request.card_ts is not None
                or request.digest_channel is not None  # listed in a digest instead
            ):
                return
            drawn = approval_view(request)
        ref = self._find(drawn) if look_first else None
        posted = ref is None
        if ref is None:
            try:
                ref = self.notifier.approval_requested(drawn)
            except Exception:
                logger.exception("could not post the card of %s; it is retried later", drawn.id)
                return
            fault_point("after_card_post")
        if ref is not None:
            self._keep(drawn, ref=ref)
            if posted:
                # Only with a card we posted now: one that was found was announced, or its
                # process died in between (at most once; the reminder follows either way).
                self.ping(drawn.id)

    def _find(self, drawn: ApprovalView) -> MessageRef | None:
        try:
            return self.notifier.find_card(drawn)
        except Exception:
            # Posting again risks a second card; never posting leaves reviewers with none.
            logger.exception("could not look for the card of %s; posting it again", drawn.id)
            return None

    def _keep(self, drawn: ApprovalView, *, ref: MessageRef) -> None:
        """Store the reference; if the request moved on while the card was being posted (a
        click on it, a decision from a modal, an expiry), draw the card again as it is now,
        on a thread of its own: the caller holds the run's lock, which the resume of that
        decision waits for, and a slow Slack call must not hold it. Not while it is being
        resumed: the resume draws its end from the row, and a redraw from here could reach
        Slack after it (from another process, nothing orders the two)."""
        with self.db.transaction() as s:
            repo = ApprovalRepository(s)
            request = repo.get(drawn.id, for_update=True)
            if request is None:
                return
            now = approval_view(request)
            moved = (now.status, now.outcome, now.actions) != (
                drawn.status,
                drawn.outcome,
                drawn.actions,
            )
            # Moved on: left to the repair until the card is drawn again (a crash between).
            shows = None if moved else drawn.status
            CardRepository(s).adopt_card(request, channel=ref.channel, ts=ref.ts, shows=shows)
            if moved:
                now = approval_view(request)  # with the reference as stored now
        if moved and now.status != RequestStatus.RESUMING:
            redraw = threading.Thread(
                target=self._show_card_logged, args=(now,), name=f"card-redraw-{now.id}"
            )
            redraw.daemon = True
            try:
                redraw.start()
            except RuntimeError:  # no thread to be had: stored as unknown, the repair draws it
                logger.exception("could not draw the card of %s again; repaired later", now.id)

    def show_card(self, view: ApprovalView) -> None:
        """Re-render the card; remember what it shows so a stale card can be repaired later.
        A card whose reference is not stored yet is left to whoever stores it. A request
        reviewed in a digest has no card: the digest listing it is redrawn instead."""
        if view.digest_channel is not None and self.digests is not None:
            self.digests.show_for_request(view.id)
            return
        if view.card_ts is None:
            return
        now = self.cards.update(view)
        if now is not None:
            self.show_card(now)

    def show_cards(self, views: Iterable[ApprovalView]) -> int:
        """``show_card`` for each, e.g. the approvals a run's end closed; how many did not
        fail with an error (Slack's own are logged by ``show_card``). One that failed is
        logged, and left out of date for ``repair_cards``."""
        drawn = 0
        for view in views:
            try:
                self.show_card(view)
            except Exception:
                logger.exception("could not redraw the card of %s; repaired later", view.id)
            else:
                drawn += 1
        return drawn

    @contextmanager
    def showing_card(self, view: ApprovalView, *, after: float = 0.0) -> Iterator[None]:
        """Update the card while the body runs (a resume), not before it: the reviewer's
        result then waits on no Slack call but the last. Whichever of the two updates reaches
        Slack last, the card ends right: an update drawn before the request moved on is drawn
        again (``show_card``). Waits for the update before leaving.

        ``after``: seconds the body may take before the card says it is under way; a body
        done sooner drew the end itself, and the card is updated once, not twice (a busy
        channel's Slack calls are rate-limited). A body that raised leaves the card saying
        "under way", which is what the store says."""
        finished = threading.Event()
        ended_well: list[bool] = []

        def update() -> None:
            if after > 0 and finished.wait(after) and ended_well:
                return
            self._show_card_logged(view)

        updater = threading.Thread(target=update, name=f"card-{view.id}", daemon=True)
        updater.start()
        try:
            yield
            ended_well.append(True)
        finally:
            finished.set()
            updater.join()

    def _show_card_logged(self, view: ApprovalView) -> None:
        try:
            self.show_card(view)
        except Exception:  # the card is out of date at worst: ``repair_cards`` redraws it
            logger.exception("could not update the card of %s; it is repaired later", view.id)

    def retry_card_posts(self, *, created_before: dt.datetime) -> int:
        """Cards that never got a reference, under the run's thread lock, which the first poster
        holds until it is done: never while that post is under way, one process at a time.
        Busy runs wait for the next round."""
        with self.db.transaction() as s:
            missing = MaintenanceQueries(s).without_card(created_before=created_before)
        done = 0
        for request_id, run_id in missing:
            try:
                with self.locks.try_hold(run_id) as held:
                    if held:
                        self.post_card(request_id, look_first=True)
                        done += 1
            except Exception:  # one card must not keep the others from their post
                logger.exception("could not post the card of %s; tried again later", request_id)
        return done

    def repair_cards(self) -> int:
        """Redraw cards whose message shows an older status (a crash between the two)."""
        with self.db.transaction() as s:
            views = [approval_view(r) for r in MaintenanceQueries(s).cards_out_of_date()]
        return self.show_cards(views)

    def ping(
        self,
        request_id: str,
        *,
        action_ids: tuple[str, ...] | None = None,
        after: str | None = None,
    ) -> None:
        """Tell the reviewers who can act now that the card needs them (of ``action_ids``
        only, after ``after`` signed them off). Audited first, sent at most once: a failure is
        logged, never raised into the post or the decision that asked for it, and the reminder
        still comes. Never on a redraw."""
        if self.reach is None:
            return
        try:
            self._ping(self.reach, request_id, action_ids=action_ids, after=after)
        except Exception:
            logger.exception("could not tell the reviewers of %s", request_id)

    def _ping(
        self,
        reach_of: ReviewerReach,
        request_id: str,
        *,
        action_ids: tuple[str, ...] | None,
        after: str | None,
    ) -> None:
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            if request is None or request.status != RequestStatus.PENDING:
                return
            view, team_id = approval_view(request), request.team_id
        # User group look-ups (Slack, cached) happen outside any transaction.
        reach = reach_of.of(view, action_ids=action_ids)
        if not reach:
            return
        with self.db.transaction() as s:
            AuditRepository(s).record(
                "reviewers_notified",
                run_id=view.run.id,
                request_id=request_id,
                team_id=team_id,
                detail={
                    "mentioned": [*reach.mention.users, *reach.mention.usergroups],
                    "direct": list(reach.direct),
                    "after": after,
                },
            )
        self.notifier.reviewers_needed(view, reach, after=after)

    # Digests -------------------------------------------------------------------------------

    def post_digests(self) -> int:
        """Digests that are due, one per channel (split when they would not fit)."""
        return self.digests.post_due() if self.digests is not None else 0

    def repair_digests(self) -> int:
        """Digests whose post was lost or whose redraw a crash interrupted."""
        if self.digests is None:
            return 0
        return self.digests.retry_posts() + self.digests.repair()

    # Results and notices --------------------------------------------------------------------

    def run_finished(self, run: RunView) -> bool:
        """Tell the run's thread its result (``RunResults.tell``); whether it is settled."""
        return self.results.tell(run)

    def post_missing_results(self, *, settled_before: dt.datetime) -> int:
        """Results of finished runs that never reached the thread; one replica posts each."""
        return self.results.post_missing(settled_before=settled_before)

    def expired(self, view: ApprovalView) -> None:
        """A notice, not retried: the card itself shows the expiry once it is redrawn."""
        try:
            self.notifier.approval_expired(view)
        except Exception:
            logger.exception("could not announce the expiry of %s", view.id)

    def remind(self, view: ApprovalView, reviewers: Reviewers, escalation: str | None) -> None:
        """Sent once (its turn is taken before it is sent); a failure is logged."""
        try:
            self.notifier.approval_reminder(view, reviewers, escalation)
        except Exception:
            logger.exception("could not send the reminder of %s", view.id)
