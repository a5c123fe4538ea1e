"""What a stored click or submission carries: enough to redo its work in any process."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from agent_runtime.authorization import Actor
from agent_runtime.notifier import MessageRef
from bot.services import Drop


class ActorRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    user_id: str
    team_id: str | None = None
    enterprise_id: str | None = None


class CardRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    channel: str
    ts: str


class OpenView(BaseModel):
    """The modal a button was pressed in (a review modal is redrawn after the decision)."""

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    callback_id: str = ""
    private_metadata: str = ""


class Work(BaseModel):
    """The parsed payload of one decision click or submission, as stored in the inbox."""

    model_config = ConfigDict(frozen=True)

    actor: ActorRef
    what: str
    """The Slack id of the button or modal (for audit rows and logs)."""
    action_id: str | None = None
    request_id: str | None = None
    run_id: str | None = None
    """The run a Cancel click names."""
    seen: str | None = None
    """The version the reviewer saw: an action hash, or an Approve all digest."""
    channel: str | None = None
    """Where to tell the user; none for a modal submission (the card's channel is used)."""
    card: CardRef | None = None
    view: OpenView | None = None
    decision: str = "approve"
    message: str | None = None
    edited_args: dict[str, Any] | None = None

    @classmethod
    def of(cls, actor: Actor, **fields: Any) -> Work:
        ref = ActorRef(
            user_id=actor.user_id, team_id=actor.team_id, enterprise_id=actor.enterprise_id
        )
        return cls(actor=ref, **fields)

    @property
    def who(self) -> Actor:
        return Actor(**self.actor.model_dump())

    @property
    def card_ref(self) -> MessageRef | None:
        return MessageRef(channel=self.card.channel, ts=self.card.ts) if self.card else None

    def drop(self) -> Drop:
        """Whom to tell, and what to audit, if this work cannot be stored or fails."""
        return Drop(
            actor=self.who,
            what=self.what,
            channel=self.channel,
            action_id=self.action_id,
            request_id=self.request_id,
            run_id=self.run_id,
        )
