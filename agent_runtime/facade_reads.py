"""The façade's reads: an approval, what waits on a reviewer, what an attempt decided, an edit
form, whether a decision would be refused. Each asks one owner (or the store) and orchestrates
nothing, so they sit apart from the calls that do; ``ApprovalEngine`` inherits them."""

from __future__ import annotations

from typing import Any

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.decisions import DecisionRecorder
from agent_runtime.edits import EditRules
from agent_runtime.listing import PendingList
from agent_runtime.views import ApprovalView, approval_view
from store.db import Database
from store.repositories import ApprovalRepository


class FacadeReads:
    """Set by the façade's constructor: the store and the owners these reads ask."""

    db: Database
    pending: PendingList
    decisions: DecisionRecorder
    edits: EditRules

    def approval(self, request_id: str) -> ApprovalView | None:
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            return approval_view(request) if request else None

    def approval_of_action(self, action_id: str) -> ApprovalView | None:
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            request = ApprovalRepository(s).get(action.request_id) if action else None
            return approval_view(request) if request else None

    def pending_for(self, actor: Actor, *, limit: int = 50) -> list[ApprovalView]:
        """The approvals waiting on this reviewer, oldest first."""
        return self.pending.for_reviewer(actor, limit=limit)

    def recorded_by(self, request_id: str, attempt_key: str) -> dict[str, str]:
        """What one attempt already decided: action id -> the version it decided on."""
        return self.decisions.recorded_by(request_id, attempt_key)

    def edit_form(self, action_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        return self.edits.form(action_id)

    def edit_errors(self, action_id: str, edited: dict[str, Any]) -> dict[str, str]:
        return self.edits.errors_for(action_id, edited)

    def check(
        self, *, action_id: str, actor: Actor, decision: str, seen_hash: str | None
    ) -> Refusal | None:
        """Whether this decision would be refused, without recording anything."""
        return self.decisions.check(
            action_id=action_id, actor=actor, decision=decision, seen_hash=seen_hash
        )
