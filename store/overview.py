"""What one person's lists read: their pending requests, their runs, what they decided, and
who has opened the Home tab (so only their Home is republished when something changes)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload

from store.display_models import HomeViewer
from store.models import Action, ApprovalRequest, Decision, Run, utcnow
from store.statuses import RequestStatus


@dataclass(frozen=True)
class DecidedRow:
    """One decision someone recorded, with what it was on."""

    request_id: str
    tool_name: str
    decision: str
    at: dt.datetime
    request_status: str
    card_channel: str | None
    card_ts: str | None
    thread_ts: str | None


@dataclass(frozen=True)
class Viewer:
    user_id: str
    team_id: str | None
    enterprise_id: str | None


class OverviewQueries:
    def __init__(self, session: Session) -> None:
        self.session = session

    def requested_pending(self, requester: str, *, limit: int) -> list[ApprovalRequest]:
        """The requester's own requests still waiting for reviewers, oldest first."""
        stmt = (
            select(ApprovalRequest.id)
            .where(
                ApprovalRequest.requester_id == requester,
                ApprovalRequest.status == RequestStatus.PENDING,
            )
            .order_by(ApprovalRequest.created_at, ApprovalRequest.id)
            .limit(limit)
        )
        ids = list(self.session.scalars(stmt))
        if not ids:
            return []
        loaded = (
            select(ApprovalRequest)
            .where(ApprovalRequest.id.in_(ids))
            .order_by(ApprovalRequest.created_at, ApprovalRequest.id)
            .options(
                joinedload(ApprovalRequest.run),
                joinedload(ApprovalRequest.actions).joinedload(Action.decisions),
            )
        )
        return list(self.session.scalars(loaded).unique())

    def runs_of(self, requester: str, *, limit: int) -> list[Run]:
        """The requester's latest runs, newest first."""
        stmt = (
            select(Run)
            .where(Run.requester_id == requester)
            .order_by(Run.created_at.desc(), Run.id.desc())
            .limit(limit)
        )
        return list(self.session.scalars(stmt))

    def decided_by(self, reviewer: str, *, limit: int) -> list[DecidedRow]:
        """The reviewer's latest decisions, newest first."""
        stmt = (
            select(Decision, Action.tool_name, ApprovalRequest, Run.thread_ts)
            .join(Action, Action.id == Decision.action_id)
            .join(ApprovalRequest, ApprovalRequest.id == Decision.request_id)
            .join(Run, Run.id == ApprovalRequest.run_id)
            .where(Decision.reviewer_id == reviewer)
            .order_by(Decision.created_at.desc(), Decision.id.desc())
            .limit(limit)
        )
        return [
            DecidedRow(
                request_id=request.id,
                tool_name=tool_name,
                decision=decision.type,
                at=decision.created_at,
                request_status=request.status,
                card_channel=request.card_channel,
                card_ts=request.card_ts,
                thread_ts=thread_ts,
            )
            for decision, tool_name, request, thread_ts in self.session.execute(stmt)
        ]


class HomeViewers:
    def __init__(self, session: Session) -> None:
        self.session = session

    def remember(self, user_id: str, *, team_id: str | None, enterprise_id: str | None) -> None:
        """Upsert by primary key: the latest identity the user opened the tab with."""
        self.session.merge(
            HomeViewer(
                user_id=user_id, team_id=team_id, enterprise_id=enterprise_id, opened_at=utcnow()
            )
        )

    def all(self, *, limit: int) -> list[Viewer]:
        """Everyone who has opened the Home tab (at most ``limit``)."""
        stmt = select(HomeViewer).order_by(HomeViewer.user_id).limit(limit)
        return [
            Viewer(user_id=v.user_id, team_id=v.team_id, enterprise_id=v.enterprise_id)
            for v in self.session.scalars(stmt)
        ]
