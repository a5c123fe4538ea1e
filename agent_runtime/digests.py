"""Digests: pending approvals of the risk tiers the policy reviews in batches, listed together
in one message per channel instead of one card each. Never inside a database transaction.

When is a digest posted? In the background round, per channel, once the oldest request still
waiting for one has waited the policy's ``digest.every``; it then lists every request of that
channel still waiting (each request in exactly one digest), split into several messages when
their actions would not fit in one.

Crash safety, as for cards: the digest and its items are stored first, under a short posting
lease (``posting_until``), then posted, then its reference is stored. A post that failed, or
reached the chat while its answer was lost, leaves the reference empty; once the lease runs out
one replica takes it over, looks for the message first (digests carry their id in message
metadata) and adopts it, or posts again. So a lost answer costs at most one look per lease,
never a digest posted again and again.

What each digest shows is remembered as a fingerprint; every change of a listed request
redraws it (``show_for_request``), and ``repair`` redraws one left stale by a crash.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from sqlalchemy.exc import IntegrityError

from agent_runtime.faults import fault_point
from agent_runtime.notifier import MessageRef, Notifier
from agent_runtime.recording import MAX_DIGEST_ACTIONS
from agent_runtime.views import DigestView, approval_view
from store.db import Database
from store.digests import DigestRepository
from store.models import ApprovalRequest
from store.statuses import RequestStatus

logger = logging.getLogger(__name__)
REDRAWS = 3
"""Redraws in a row when the listed requests changed while one was drawn."""


def pack(requests: list[ApprovalRequest], *, limit: int = MAX_DIGEST_ACTIONS) -> list[list[str]]:
    """Request ids in order, cut into groups of at most ``limit`` rows each (every action not
    exempt is a row, decided or not; a request is never split: its actions are decided
    together)."""
    groups: list[list[str]] = []
    size = limit
    for request in requests:
        count = sum(1 for a in request.actions if not a.exempt)
        if size + count > limit:
            groups.append([])
            size = 0
        groups[-1].append(request.id)
        size += count
    return groups


class DigestPoster:
    def __init__(
        self,
        *,
        db: Database,
        notifier: Notifier,
        every: dt.timedelta | None,
        clock: Callable[[], dt.datetime],
        lease: dt.timedelta = dt.timedelta(seconds=60),
    ) -> None:
        """``every``: the policy's digest interval (``None``: no digests); ``lease``: how long
        a poster may take before another replica looks for its digest and posts it."""
        self.db = db
        self.notifier = notifier
        self.every = every
        self.clock = clock
        self.lease = lease

    def post_due(self) -> int:
        """Post the digests that are due; the number of messages posted. Without a digest in
        the policy (it was removed after requests were recorded for one) what still waits is
        listed at once: nothing is left without a card or a digest until it expires."""
        now = self.clock()
        every = self.every if self.every is not None else dt.timedelta(0)
        with self.db.transaction() as s:
            channels = DigestRepository(s).due_channels(waited_since=now - every)
        posted = 0
        for channel in channels:
            try:
                for digest_id in self._create(channel, now=now):
                    posted += self._post(digest_id, look_first=False)
            except Exception:  # one channel's digest must not keep the others from theirs
                logger.exception("could not post the digest of %s; tried again later", channel)
        return posted

    def _create(self, channel: str, *, now: dt.datetime) -> list[str]:
        """List the channel's waiting requests in new digests (none if another replica just
        listed them: the items' key refuses a second listing and this transaction is undone)."""
        try:
            with self.db.transaction() as s:
                repo = DigestRepository(s)
                waiting = repo.undigested(channel)
                team = waiting[0].team_id if waiting else None
                # One workspace per digest: its people see nothing of another's calls (the
                # others are listed on the next round).
                waiting = [r for r in waiting if r.team_id == team]
                return [
                    repo.create(
                        channel=channel,
                        team_id=team,
                        request_ids=group,
                        now=now,
                        posting_until=now + self.lease,
                    )
                    for group in pack(waiting)
                ]
        except IntegrityError:
            logger.info("the digest of %s was listed by another process", channel)
            return []

    def _view(self, digest_id: str) -> DigestView | None:
        with self.db.transaction() as s:
            repo = DigestRepository(s)
            digest = repo.get(digest_id)
            if digest is None:
                return None
            approvals = tuple(approval_view(r) for r in repo.requests(digest_id))
            return DigestView(
                id=digest.id,
                channel=digest.channel,
                ts=digest.ts,
                approvals=approvals,
                team_id=digest.team_id,
            )

    def _post(self, digest_id: str, *, look_first: bool) -> int:
        """Post (or, after a lost answer, find) one digest and store where it is."""
        view = self._view(digest_id)
        if view is None or view.ts is not None:
            return 0
        ref: MessageRef | None = None
        if look_first:
            try:
                ref = self.notifier.find_digest(view)
            except Exception:
                logger.exception("could not look for digest %s; posting it again", digest_id)
        posted = ref is None
        if ref is None:
            try:
                ref = self.notifier.digest_posted(view)
            except Exception:
                logger.exception("could not post digest %s; it is retried later", digest_id)
                return 0
            fault_point("after_digest_post")
        if ref is None:
            return 0
        with self.db.transaction() as s:
            DigestRepository(s).posted(digest_id, ts=ref.ts, drawn=view.fingerprint)
        self.show(digest_id, force=False)  # a decision or an expiry while it was posted
        return int(posted)

    def retry_posts(self) -> int:
        """Digests whose poster failed or died: one replica looks for each, or posts it."""
        now = self.clock()
        with self.db.transaction() as s:
            candidates = DigestRepository(s).unposted(now=now)
        done = 0
        for digest_id in candidates:
            try:
                with self.db.transaction() as s:
                    won = DigestRepository(s).claim_post(digest_id, now=now, until=now + self.lease)
                if won:
                    self._post(digest_id, look_first=True)
                    done += 1
            except Exception:  # as for cards: one must not keep the others from their post
                logger.exception("could not post digest %s; tried again later", digest_id)
        return done

    def show_for_request(self, request_id: str) -> None:
        """Redraw the digest listing this request, if it is posted."""
        with self.db.transaction() as s:
            digest_id = DigestRepository(s).of_request(request_id)
        if digest_id is not None:
            self.show(digest_id)

    def show(self, digest_id: str, *, force: bool = True) -> bool:
        """Redraw from the current state of its requests, then remember what it shows; drawn
        again if they changed meanwhile. ``force=False`` skips a digest already up to date.
        A failure is logged: ``repair`` draws it later."""
        for _ in range(REDRAWS):
            view = self._view(digest_id)
            if view is None or view.ts is None:
                return False
            with self.db.transaction() as s:
                stored = DigestRepository(s).get(digest_id)
                drawn = stored.drawn if stored is not None else None
            if not force and drawn == view.fingerprint:
                if all(a.status not in _OPEN for a in view.approvals):
                    # Posted already closed (say, after a lost post): nothing to redraw, but it
                    # must leave the repair's list, or it crowds out newer digests for good.
                    with self.db.transaction() as s:
                        DigestRepository(s).mark_drawn(digest_id, drawn=drawn, settled=True)
                return False
            try:
                self.notifier.digest_updated(view)
            except Exception:
                logger.exception("could not redraw digest %s; it is retried later", digest_id)
                return False
            now = self._view(digest_id)
            settled = all(a.status not in _OPEN for a in view.approvals)
            with self.db.transaction() as s:
                DigestRepository(s).mark_drawn(digest_id, drawn=view.fingerprint, settled=settled)
            if now is None or now.fingerprint == view.fingerprint:
                return True
            force = True
        return True

    def repair(self) -> int:
        """Redraw posted digests whose message shows an older state (a crash in between)."""
        with self.db.transaction() as s:
            candidates = DigestRepository(s).open_posted()
        done = 0
        for digest_id in candidates:
            try:
                done += self.show(digest_id, force=False)
            except Exception:  # one that cannot be drawn must not keep the others as they are
                logger.exception("could not redraw digest %s; tried again later", digest_id)
        return done


_OPEN = (RequestStatus.PENDING, RequestStatus.RESUMING)
