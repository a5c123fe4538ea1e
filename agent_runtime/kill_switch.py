"""The operators' kill switch: during an incident, an admin pauses all gated execution at once.

While paused, no card can be approved (approve and edit are refused; reject stays possible) and
the point-of-effect gate refuses every gated tool, approved or not, with the reason in the
run's thread. Pausing and resuming are audited and announced in the escalation channel.
An admin is someone with the policy's ``admins`` role; the CLI acts for whoever can run it
(access to the database is already more than any Slack role).
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from agent_runtime.authorization import Actor
from agent_runtime.errors import MembershipUnconfirmed
from agent_runtime.notifier import Notifier
from agent_runtime.policy import Policy
from store.db import Database
from store.repositories import AuditRepository
from store.switch import SwitchRepository, SwitchState

logger = logging.getLogger(__name__)


class SwitchOutcome(enum.StrEnum):
    """What a pause or resume came to; each has one user-facing text in the bot."""

    PAUSED = "paused"
    RESUMED = "resumed"
    ALREADY_PAUSED = "already_paused"
    ALREADY_RUNNING = "already_running"
    NOT_ALLOWED = "not_allowed"
    MEMBERSHIP_UNCONFIRMED = "membership_unconfirmed"


@dataclass(frozen=True)
class SwitchResult:
    outcome: SwitchOutcome
    state: SwitchState


def paused_reason(state: SwitchState) -> str:
    """How a refusal explains the pause (the gate's reason, the card's notice)."""
    why = f": {state.reason}" if state.reason else ""
    return f"gated execution is paused by {state.changed_by or 'an operator'}{why}"


class KillSwitch:
    def __init__(
        self,
        *,
        db: Database,
        policy: Policy,
        notifier: Notifier | None,
        usergroup_members: Callable[[str], frozenset[str]],
        clock: Callable[[], dt.datetime],
    ) -> None:
        self.db = db
        self.policy = policy
        self.notifier = notifier
        self.usergroup_members = usergroup_members
        self.clock = clock

    def state(self) -> SwitchState:
        with self.db.transaction() as s:
            return SwitchRepository(s).state()

    def pause(self, actor: Actor | str, *, reason: str | None) -> SwitchResult:
        """``actor``: a Slack user (checked against ``admins``) or an operator's name (CLI)."""
        return self._switch(actor, paused=True, reason=(reason or "").strip() or None)

    def resume(self, actor: Actor | str) -> SwitchResult:
        return self._switch(actor, paused=False, reason=None)

    def _switch(self, actor: Actor | str, *, paused: bool, reason: str | None) -> SwitchResult:
        who = actor if isinstance(actor, str) else actor.user_id
        team = None if isinstance(actor, str) else actor.team_id
        refused = self._standing(actor)
        with self.db.transaction() as s:
            switch, audit = SwitchRepository(s), AuditRepository(s)
            if refused is not None:
                audit.record(
                    "execution_switch_refused",
                    outcome="refused",
                    actor_id=who,
                    team_id=team,
                    reason=refused.value,
                    detail={"pause": paused},
                )
                return SwitchResult(refused, switch.state())
            changed = switch.set(paused=paused, by=who, reason=reason, at=self.clock())
            state = switch.state()
            if changed:
                audit.record(
                    "execution_paused" if paused else "execution_resumed",
                    outcome="allowed",
                    actor_id=who,
                    team_id=team,
                    reason=reason,
                )
        if not changed:
            return SwitchResult(
                SwitchOutcome.ALREADY_PAUSED if paused else SwitchOutcome.ALREADY_RUNNING, state
            )
        self._announce(state, team_id=team)
        return SwitchResult(SwitchOutcome.PAUSED if paused else SwitchOutcome.RESUMED, state)

    def _standing(self, actor: Actor | str) -> SwitchOutcome | None:
        if isinstance(actor, str):
            return None
        try:
            admin = self.policy.for_team(actor.team_id).is_admin(
                actor.user_id, usergroup_members=self.usergroup_members
            )
        except MembershipUnconfirmed:
            return SwitchOutcome.MEMBERSHIP_UNCONFIRMED
        return None if admin else SwitchOutcome.NOT_ALLOWED

    def _announce(self, state: SwitchState, *, team_id: str | None) -> None:
        channel = self.policy.defaults.escalation_channel
        if channel is None or self.notifier is None:
            logger.warning(
                "execution %s; no escalation channel to announce it in",
                "paused" if state.paused else "resumed",
            )
            return
        try:
            self.notifier.execution_switched(state, channel=channel, team_id=team_id)
        except Exception:
            logger.exception("could not announce the kill switch in %s", channel)
