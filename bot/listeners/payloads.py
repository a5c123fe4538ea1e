"""The shapes of what Slack sends us, checked whole before any listener reads a field.

A signed payload of another shape is not Slack's (or is a bug on its side): it is refused with
a 400 and changes nothing, instead of failing halfway through a listener with a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from slack_bolt import BoltContext, BoltRequest, BoltResponse
from slack_bolt.middleware import Middleware

from agent_runtime.authorization import Actor
from agent_runtime.notifier import MessageRef
from bot.metrics import Metrics
from bot.services import Drop

logger = logging.getLogger(__name__)
PAYLOAD = "approval_payload"


class MalformedPayload(ValueError):
    """A signed request whose payload is not shaped as Slack sends it."""


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class User(_Shape):
    id: str = Field(min_length=1)
    team_id: str | None = None


class Ref(_Shape):
    """A team, an enterprise or a channel: only the id is read."""

    id: str | None = None


class Container(_Shape):
    type: str | None = None
    channel_id: str | None = None
    message_ts: str | None = None
    is_ephemeral: bool | None = None


class Option(_Shape):
    value: str


class InputState(_Shape):
    """One input's value as submitted: text (and numbers) in ``value``, choices in
    ``selected_option``."""

    value: str | None = None
    selected_option: Option | None = None


class State(_Shape):
    values: dict[str, dict[str, InputState]] = Field(default_factory=dict)


class Block(_Shape):
    type: str | None = None
    block_id: str | None = None


class ViewRef(_Shape):
    """The modal a button was pressed in: which one, and the ids it carries."""

    id: str | None = None
    callback_id: str = ""
    private_metadata: str = Field(default="", max_length=3000)  # Slack's own limit


class SubmittedView(ViewRef):
    type: str
    callback_id: str
    state: State = Field(default_factory=State)
    blocks: list[Block] = Field(default_factory=list)

    def input_blocks(self) -> list[str]:
        return [b.block_id for b in self.blocks if b.type == "input" and b.block_id]

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Action(_Shape):
    action_id: str
    value: str = Field(default="", max_length=2000)  # Slack's limit for a button value


class _Interaction(_Shape):
    user: User
    team: Ref | None = None
    enterprise: Ref | None = None
    trigger_id: str = ""

    @property
    def actor(self) -> Actor:
        """Identity is user id + team id (+ enterprise id), never a name."""
        team = self.user.team_id or (self.team.id if self.team else None)
        enterprise = self.enterprise.id if self.enterprise else None
        return Actor(user_id=self.user.id, team_id=team, enterprise_id=enterprise)


class Click(_Interaction):
    """A ``block_actions`` payload: a button pressed on a card or inside one of our modals."""

    actions: list[Action] = Field(min_length=1)
    container: Container | None = None
    channel: Ref | None = None
    view: ViewRef | None = None

    @property
    def action(self) -> Action:
        return self.actions[0]

    @property
    def channel_id(self) -> str | None:
        """The channel the click came from; none for a click inside a modal."""
        return (self.container.channel_id if self.container else None) or (
            self.channel.id if self.channel else None
        )

    @property
    def card(self) -> MessageRef | None:
        """The message the button was on (Slack signs it with the payload); None for clicks
        from a modal or an ephemeral message."""
        c = self.container
        if c is None or c.type != "message" or c.is_ephemeral:
            return None
        if not c.channel_id or not c.message_ts:
            return None
        return MessageRef(channel=c.channel_id, ts=c.message_ts)

    def drop(self, *, action_id: str | None = None, request_id: str | None = None) -> Drop:
        """This click, as refused by a full worker pool."""
        return Drop(
            actor=self.actor,
            what=self.action.action_id,
            channel=self.channel_id,
            action_id=action_id,
            request_id=request_id,
        )


class Submission(_Interaction):
    """A ``view_submission`` payload."""

    view: SubmittedView


class Command(_Shape):
    """A slash command (form fields, so every value is text)."""

    command: str
    text: str = ""
    user_id: str = Field(min_length=1)
    channel_id: str = Field(min_length=1)
    team_id: str | None = None
    enterprise_id: str | None = None
    response_url: str | None = None

    @property
    def actor(self) -> Actor:
        return Actor(user_id=self.user_id, team_id=self.team_id, enterprise_id=self.enterprise_id)


class Event(_Shape):
    """The fields of an event that Bolt's own middleware and our listeners read."""

    type: str
    subtype: str | None = None
    channel_type: str | None = None
    tab: str | None = None
    user: str | None = None
    thread_ts: str | None = None
    bot_id: str | None = None
    team: str | None = None
    user_team: str | None = None
    message: dict[str, Any] | None = None
    previous_message: dict[str, Any] | None = None
    subteam_id: str | None = None
    subteam: dict[str, Any] | None = None


class EventCallback(_Shape):
    """An Events API delivery. Bolt reads ``event`` as an object before any of our code runs,
    so a signed body of another shape must be refused before Bolt sees it."""

    type: Literal["event_callback"]
    event: Event
    team_id: str | None = None
    enterprise_id: str | None = None
    api_app_id: str | None = None
    is_ext_shared_channel: bool | None = None
    authorizations: list[dict[str, Any]] | None = None


_INTERACTIONS: dict[str, type[_Shape]] = {
    "block_actions": Click,
    "view_submission": Submission,
    "event_callback": EventCallback,
}


def _shape_of(body: Any) -> type[_Shape] | None:
    if not isinstance(body, dict):
        return None
    if "command" in body:
        return Command
    if "event" in body:
        return EventCallback
    return _INTERACTIONS.get(str(body.get("type")))


def parse_payload(body: Any) -> _Shape | None:
    """The typed payload of a slash command, a click or a submission; ``None`` for others."""
    shape = _shape_of(body)
    if shape is None:
        return None
    try:
        return shape.model_validate(body)
    except ValidationError as exc:
        fields = sorted({".".join(map(str, e["loc"])) for e in exc.errors()})[:5]
        raise MalformedPayload(f"{shape.__name__}: bad {', '.join(fields)}") from None


Shape = TypeVar("Shape", bound=_Shape)


def payload_of(context: BoltContext, shape: type[Shape]) -> Shape:
    payload = context.get(PAYLOAD)
    if not isinstance(payload, shape):
        raise MalformedPayload(f"expected a {shape.__name__} payload")
    return payload


class PayloadCheck(Middleware):
    """The first of our middlewares, and Bolt's error handler: the one place a malformed
    payload becomes a 400. Class-based, so it runs before Bolt builds listener arguments from
    the body (which fails on some shapes, e.g. a submitted view without a ``type``)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def process(
        self, *, req: BoltRequest, resp: BoltResponse, next: Callable[[], Any]
    ) -> BoltResponse | None:
        try:
            payload = parse_payload(req.body)
        except MalformedPayload as exc:
            return self.refuse(exc)
        if payload is not None:
            req.context[PAYLOAD] = payload
        next()
        return resp

    def refuse(self, error: MalformedPayload) -> BoltResponse:
        logger.warning("malformed Slack payload refused: %s", error)
        self.metrics.inc("malformed_requests")
        return BoltResponse(status=400, body="malformed payload\n")

    def on_error(self, error: Exception, response: BoltResponse | None) -> BoltResponse | None:
        """Errors raised by listeners: a malformed payload is the sender's (400, or nothing
        once acked); anything else is ours, logged in full, and stays a 500."""
        if isinstance(error, MalformedPayload):
            refused = self.refuse(error)
            return refused if response is not None else None
        logger.exception("unexpected error while serving Slack", exc_info=error)
        return None
