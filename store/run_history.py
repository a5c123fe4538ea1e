"""What a run's earlier requests say, read each time it stops on a new interrupt: the
operation ids already given, the calls reviewers rejected, the policy's refusals in a row."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.models import Action, ApprovalRequest
from store.statuses import ActionOutcome


class RunHistory:
    """Takes a session, never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def operation_ids(self, run_id: str) -> set[str]:
        """Operation ids already given to this run's actions (each is used once)."""
        stmt = (
            select(Action.operation_id)
            .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
            .where(ApprovalRequest.run_id == run_id)
        )
        return set(self.session.scalars(stmt))

    def rejected_by_reviewers(self, run_id: str) -> list[Action]:
        """This run's actions a reviewer rejected (not the policy), oldest first: the calls a
        revision may answer."""
        stmt = (
            select(Action)
            .join(ApprovalRequest, Action.request_id == ApprovalRequest.id)
            .where(ApprovalRequest.run_id == run_id, Action.outcome == ActionOutcome.REJECTED)
            .order_by(ApprovalRequest.created_at, Action.position)
        )
        return [a for a in self.session.scalars(stmt) if a.decisions]

    def refused_in_a_row(self, run_id: str, *, marked: str) -> int:
        """How many of this run's latest requests, newest first and in a row, had a call
        refused without anyone (its ``extra`` holds the ``marked`` key, the policy's reason):
        rounds of proposals the agent made after being told, not calls in one round."""
        stmt = (
            select(ApprovalRequest.id, Action.extra)
            .join(Action, Action.request_id == ApprovalRequest.id)
            .where(ApprovalRequest.run_id == run_id)
            .order_by(ApprovalRequest.created_at.desc(), ApprovalRequest.id.desc())
        )
        refused: dict[str, bool] = {}  # request id -> refused, newest first
        for request_id, extra in self.session.execute(stmt):
            refused[request_id] = refused.get(request_id, False) or bool(extra and marked in extra)
        in_a_row = 0
        for was_refused in refused.values():
            if not was_refused:
                break
            in_a_row += 1
        return in_a_row
