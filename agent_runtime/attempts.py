"""Audit rows for attempts that never became a decision: a refused "Approve all" as a whole,
or a click, submission or command dropped (the bot was too busy, or its work kept failing)."""

from __future__ import annotations

from agent_runtime.authorization import Actor, Refusal
from store.db import Database
from store.repositories import ApprovalRepository, AuditRepository, RunRepository


class AttemptLog:
    def __init__(self, *, db: Database) -> None:
        self.db = db

    def refused(
        self,
        *,
        request_id: str,
        actor: Actor,
        refusal: Refusal,
        decision: str,
        via: dict[str, str] | None = None,
    ) -> None:
        """An attempt refused before it reached one action (e.g. a stale Approve all)."""
        with self.db.transaction() as s:
            request = ApprovalRepository(s).get(request_id)
            AuditRepository(s).record(
                "decision_refused",
                outcome="refused",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=request.run_id if request else None,
                request_id=request_id if request else None,
                reason=refusal.value,
                detail={"decision": decision, **(via or {})},
            )

    def dropped(
        self,
        *,
        actor: Actor,
        what: str,
        action_id: str | None = None,
        request_id: str | None = None,
        run_id: str | None = None,
        reason: str = "busy",
    ) -> None:
        """Its user was told to try again. The action, request or run it named is kept when
        it exists."""
        with self.db.transaction() as s:
            repo = ApprovalRepository(s)
            action = repo.get_action(action_id) if action_id else None
            wanted = action.request_id if action else request_id
            request = repo.get(wanted) if wanted else None
            run = RunRepository(s).get(run_id) if run_id and request is None else None
            AuditRepository(s).record(
                "request_dropped",
                outcome="refused",
                actor_id=actor.user_id,
                team_id=actor.team_id,
                run_id=request.run_id if request else (run.id if run else None),
                request_id=request.id if request else None,
                action_id=action.id if action else None,
                reason=reason,
                detail={"dropped": what},
            )
