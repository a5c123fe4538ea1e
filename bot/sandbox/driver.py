"""Acts as Slack's users: signed slash commands, button clicks and modal submissions, shaped as
Slack sends them (``payloads``) and POSTed over HTTP to the bot's ``/slack/events``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from bot.sandbox import payloads
from bot.sandbox.payloads import Button, buttons
from bot.sandbox.server import SlackSandbox
from bot.sandbox.state import Message

__all__ = ["Button", "Reply", "SlackDriver", "buttons"]


@dataclass(frozen=True)
class Reply:
    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class SlackDriver:
    def __init__(
        self,
        *,
        sandbox: SlackSandbox,
        bot_url: str | None = None,
        signing_secret: str = "",
        team_id: str = "T0SANDBOX",
    ) -> None:
        """HTTP delivery to ``bot_url``; without it, delivery over the sandbox's Socket Mode."""
        self.sandbox = sandbox
        self.url = bot_url.rstrip("/") + "/slack/events" if bot_url else None
        self.signer = SignatureVerifier(signing_secret) if signing_secret else None
        self.team_id = team_id

    def _deliver(self, kind: str, payload: dict[str, Any]) -> Reply:
        if self.url is None:
            relay = self.sandbox.socket_mode
            if relay is None:
                raise RuntimeError("the bot has not opened a Socket Mode connection")
            ack = relay.send(kind, payload)
            return Reply(200, json.dumps(ack["payload"]) if ack.get("payload") else "")
        if kind == "slash_commands":
            return self.post(urlencode(payload))
        return self.post(urlencode({"payload": json.dumps(payload)}))

    # Raw transport ------------------------------------------------------------------------

    def post(
        self,
        body: str,
        *,
        content_type: str = "application/x-www-form-urlencoded",
        timestamp: int | None = None,
        signature: str | None = None,
        timeout: float = 10.0,
    ) -> Reply:
        assert self.url is not None and self.signer is not None, "raw posts need HTTP delivery"
        ts = str(int(time.time()) if timestamp is None else timestamp)
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": (
                (self.signer.generate_signature(timestamp=ts, body=body) or "")
                if signature is None
                else signature
            ),
        }
        request = urllib.request.Request(self.url, data=body.encode("utf-8"), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Reply(response.status, response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read().decode("utf-8"))

    def _user(self, user: str, team_id: str | None) -> dict[str, Any]:
        name = self.sandbox.state.users.get(user, user.lower())
        return {"id": user, "username": name, "name": name, "team_id": team_id or self.team_id}

    # What users do ------------------------------------------------------------------------

    def slash_command(
        self,
        *,
        user: str,
        channel: str,
        text: str,
        command: str = "/agent",
        team_id: str | None = None,
    ) -> Reply:
        form = payloads.slash_command(
            user=self._user(user, team_id),
            channel=channel,
            text=text,
            command=command,
            response_url=self.sandbox.response_url(),
            trigger_id=self.sandbox.state.issue_trigger(user),
        )
        return self._deliver("slash_commands", form)

    def block_action_payload(
        self, *, user: str, message: Message, button: Button, team_id: str | None = None
    ) -> dict[str, Any]:
        return payloads.block_actions(
            user=self._user(user, team_id),
            message=message,
            button=button,
            trigger_id=self.sandbox.state.issue_trigger(user),
            response_url=self.sandbox.response_url(),
        )

    def click(
        self, *, user: str, message: Message, button: Button, team_id: str | None = None
    ) -> Reply:
        payload = self.block_action_payload(
            user=user, message=message, button=button, team_id=team_id
        )
        return self._deliver("interactive", payload)

    def click_in_ephemeral(
        self, *, user: str, channel: str, blocks: list[dict[str, Any]], button: Button
    ) -> Reply:
        """Press a button on an ephemeral message (e.g. a slash command's answer): Slack sends
        no message ts to update, only a fresh ``response_url``."""
        message = Message(channel=channel, ts="", user=user, text="", blocks=blocks)
        payload = self.block_action_payload(user=user, message=message, button=button)
        payload["container"] = {"type": "message", "channel_id": channel, "is_ephemeral": True}
        payload.pop("message")
        return self._deliver("interactive", payload)

    def open_home(self, *, user: str) -> Reply:
        """The user opens the app's Home tab."""
        return self.event({"type": "app_home_opened", "user": user, "tab": "home"})

    def event(self, event: dict[str, Any]) -> Reply:
        """An Events API callback, as Slack POSTs it (JSON, signed)."""
        body = payloads.event_callback(
            team_id=self.team_id, event=event, event_id=f"Ev{self.sandbox.state.next_id():08d}"
        )
        if self.url is None:
            relay = self.sandbox.socket_mode
            assert relay is not None
            relay.send("events_api", body)
            return Reply(200, "")
        return self.post(json.dumps(body), content_type="application/json")

    def click_in_view(self, *, user: str, view_id: str, element: dict[str, Any]) -> Reply:
        """Press a button inside an open modal (``block_actions`` with a view container)."""
        payload = payloads.view_block_actions(
            view_id=view_id,
            view=self.sandbox.state.views[view_id].view,
            user=self._user(user, None),
            element=element,
            trigger_id=self.sandbox.state.issue_trigger(user),
        )
        return self._deliver("interactive", payload)

    def submit_view(
        self, *, user: str, view_id: str, values: dict[str, dict[str, str | dict[str, Any]]]
    ) -> Reply:
        """Submit an open modal as Slack does (see ``payloads.view_submission``); a submission
        the bot accepts closes it."""
        record = self.sandbox.state.views[view_id]
        payload = payloads.view_submission(
            user=self._user(user, None),
            view_id=view_id,
            view=record.view,
            values=values,
            trigger_id=self.sandbox.state.issue_trigger(user),
        )
        reply = self._deliver("interactive", payload)
        if reply.status == 200 and not (reply.body and "errors" in reply.body):
            self.sandbox.state.change(lambda: setattr(record, "open", False))
        return reply
