"""Digest messages and the requests they list. Takes a session, never commits.

A request waits for a digest when ``ApprovalRequest.digest_channel`` is set and no
``DigestItem`` names it; listing it (the item's primary key is the request id) happens once,
whatever the number of replicas: a second insert of the same request fails its transaction.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, joinedload
from sqlalchemy.sql.elements import ColumnElement

from store.db import affected
from store.display_models import DigestItem, DigestMessage
from store.models import Action, ApprovalRequest, new_id
from store.statuses import RequestStatus


class DigestRepository:
    def __init__(self, session: Session, *, limit: int = 100) -> None:
        self.session = session
        self.limit = limit

    @staticmethod
    def _undigested() -> list[ColumnElement[bool]]:
        listed = select(DigestItem.request_id)
        return [
            ApprovalRequest.status == RequestStatus.PENDING,
            ApprovalRequest.digest_channel.is_not(None),
            ApprovalRequest.id.not_in(listed),
        ]

    def due_channels(self, *, waited_since: dt.datetime) -> list[str]:
        """Channels whose oldest request still waiting for a digest was recorded at or before
        ``waited_since``."""
        stmt = (
            select(ApprovalRequest.digest_channel)
            .where(*self._undigested())
            .group_by(ApprovalRequest.digest_channel)
            .having(func.min(ApprovalRequest.created_at) <= waited_since)
            .limit(self.limit)
        )
        return [c for c in self.session.scalars(stmt) if c]

    def undigested(self, channel: str) -> list[ApprovalRequest]:
        """The requests of a channel waiting for a digest, oldest first, with their actions."""
        stmt = (
            select(ApprovalRequest)
            .where(ApprovalRequest.digest_channel == channel, *self._undigested())
            .order_by(ApprovalRequest.created_at, ApprovalRequest.id)
            .options(joinedload(ApprovalRequest.actions))
            .limit(self.limit)
        )
        return list(self.session.scalars(stmt).unique())

    def create(
        self,
        *,
        channel: str,
        team_id: str | None,
        request_ids: list[str],
        now: dt.datetime,
        posting_until: dt.datetime,
    ) -> str:
        """A digest listing these requests, to be posted by whoever holds ``posting_until``."""
        digest = DigestMessage(
            id=new_id("dig"),
            channel=channel,
            team_id=team_id,
            posting_until=posting_until,
            settled=False,
            created_at=now,
        )
        self.session.add(digest)
        self.session.flush()
        for position, request_id in enumerate(request_ids):
            self.session.add(
                DigestItem(request_id=request_id, digest_id=digest.id, position=position)
            )
        self.session.flush()
        return digest.id

    def get(self, digest_id: str) -> DigestMessage | None:
        return self.session.get(DigestMessage, digest_id)

    def requests(self, digest_id: str) -> list[ApprovalRequest]:
        """The requests a digest lists, in its order, each with its run, actions, decisions."""
        stmt = (
            select(ApprovalRequest)
            .join(DigestItem, DigestItem.request_id == ApprovalRequest.id)
            .where(DigestItem.digest_id == digest_id)
            .order_by(DigestItem.position)
            .options(
                joinedload(ApprovalRequest.run),
                joinedload(ApprovalRequest.actions).joinedload(Action.decisions),
            )
        )
        return list(self.session.scalars(stmt).unique())

    def of_request(self, request_id: str) -> str | None:
        return self.session.scalar(
            select(DigestItem.digest_id).where(DigestItem.request_id == request_id)
        )

    def unposted(self, *, now: dt.datetime) -> list[str]:
        """Digests never known to be posted whose poster's lease ran out (it failed or died)."""
        stmt = select(DigestMessage.id).where(
            DigestMessage.ts.is_(None), DigestMessage.posting_until <= now
        )
        return list(self.session.scalars(stmt.order_by(DigestMessage.created_at).limit(self.limit)))

    def claim_post(self, digest_id: str, *, now: dt.datetime, until: dt.datetime) -> bool:
        """Take over posting an unposted digest whose lease ran out; one replica wins."""
        result = self.session.execute(
            update(DigestMessage)
            .where(
                DigestMessage.id == digest_id,
                DigestMessage.ts.is_(None),
                DigestMessage.posting_until <= now,
            )
            .values(posting_until=until)
            .execution_options(synchronize_session=False)
        )
        return affected(result) > 0

    def posted(self, digest_id: str, *, ts: str, drawn: str) -> None:
        """Remember where the digest is (the first reference stored wins)."""
        self.session.execute(
            update(DigestMessage)
            .where(DigestMessage.id == digest_id, DigestMessage.ts.is_(None))
            .values(ts=ts, posting_until=None, drawn=drawn)
            .execution_options(synchronize_session=False)
        )

    def open_posted(self) -> list[str]:
        """Posted digests that may still change (some request they list was open last time)."""
        stmt = select(DigestMessage.id).where(
            DigestMessage.ts.is_not(None), DigestMessage.settled.is_(False)
        )
        return list(self.session.scalars(stmt.order_by(DigestMessage.created_at).limit(self.limit)))

    def mark_drawn(self, digest_id: str, *, drawn: str, settled: bool) -> None:
        self.session.execute(
            update(DigestMessage)
            .where(DigestMessage.id == digest_id)
            .values(drawn=drawn, settled=settled)
            .execution_options(synchronize_session=False)
        )
