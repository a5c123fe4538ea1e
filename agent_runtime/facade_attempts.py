"""The façade's record of attempts that decided nothing: a refused click (and the card it
came from, drawn again when it showed something else than the request now) and a click
dropped unprocessed. ``ApprovalEngine`` inherits them."""

from __future__ import annotations

from agent_runtime.announcer import Announcer
from agent_runtime.attempts import AttemptLog
from agent_runtime.authorization import Actor, Refusal
from agent_runtime.views import ApprovalView

REDRAWN = (Refusal.STALE_VERSION, Refusal.RUN_CANCELLED, Refusal.REQUEST_CLOSED)
"""Refusals of a click on a card that shows something else than the request now."""


class FacadeAttempts:
    """Set by the façade's constructor: the owners these calls use."""

    attempts: AttemptLog
    announcer: Announcer

    def approval(self, request_id: str) -> ApprovalView | None:
        raise NotImplementedError  # the façade's read (``FacadeReads``)

    def record_refusal(
        self,
        *,
        request_id: str,
        actor: Actor,
        refusal: Refusal,
        decision: str,
        via: dict[str, str] | None = None,
    ) -> None:
        self.attempts.refused(
            request_id=request_id, actor=actor, refusal=refusal, decision=decision, via=via
        )
        if refusal in REDRAWN and (current := self.approval(request_id)) is not None:
            self.announcer.show_card(current)  # e.g. closed, while the card showed buttons

    def record_dropped(
        self,
        *,
        actor: Actor,
        what: str,
        action_id: str | None = None,
        request_id: str | None = None,
        run_id: str | None = None,
        reason: str = "busy",
    ) -> None:
        self.attempts.dropped(
            actor=actor,
            what=what,
            action_id=action_id,
            request_id=request_id,
            run_id=run_id,
            reason=reason,
        )
