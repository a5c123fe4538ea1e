"""Acts as Slack's users: signed slash commands, button clicks and modal submissions, shaped as
Slack sends them and POSTed over HTTP to the bot's ``/slack/events``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from bot.sandbox.server import SlackSandbox
from bot.sandbox.state import Message


@dataclass(frozen=True)
class Reply:
    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class Button:
    block_id: str
    action_id: str
    value: str
    text: str


def buttons(message: Message) -> list[Button]:
    found = []
    for block in message.blocks:
        if block.get("type") != "actions":
            continue
        for element in block.get("elements", []):
            if element.get("type") == "button":
                found.append(
                    Button(
                        block["block_id"],
                        element["action_id"],
                        element.get("value", ""),
                        element["text"]["text"],
                    )
                )
    return found


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
        form = {
            "token": "legacy-verification-token",
            "team_id": team_id or self.team_id,
            "team_domain": "sandbox",
            "channel_id": channel,
            "channel_name": channel.lower(),
            "user_id": user,
            "user_name": self.sandbox.state.users.get(user, user.lower()),
            "command": command,
            "text": text,
            "api_app_id": "A0SANDBOX",
            "is_enterprise_install": "false",
            "response_url": self.sandbox.response_url(),
            "trigger_id": self.sandbox.state.issue_trigger(user),
        }
        return self._deliver("slash_commands", form)

    def block_action_payload(
        self, *, user: str, message: Message, button: Button, team_id: str | None = None
    ) -> dict[str, Any]:
        return {
            "type": "block_actions",
            "user": self._user(user, team_id),
            "api_app_id": "A0SANDBOX",
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
                "thread_ts": message.thread_ts,
            },
            "trigger_id": self.sandbox.state.issue_trigger(user),
            "team": {"id": team_id or self.team_id, "domain": "sandbox"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel, "name": message.channel.lower()},
            "message": {
                "type": "message",
                "ts": message.ts,
                "text": message.text,
                "blocks": message.blocks,
                "thread_ts": message.thread_ts,
            },
            "state": {"values": {}},
            "response_url": self.sandbox.response_url(),
            "actions": [
                {
                    "type": "button",
                    "action_id": button.action_id,
                    "block_id": button.block_id,
                    "value": button.value,
                    "text": {"type": "plain_text", "text": button.text},
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

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
        body = {
            "token": "legacy-verification-token",
            "team_id": self.team_id,
            "api_app_id": "A0SANDBOX",
            "event": {**event, "event_ts": f"{time.time():.6f}"},
            "type": "event_callback",
            "event_id": f"Ev{self.sandbox.state.next_id():08d}",
            "event_time": int(time.time()),
        }
        if self.url is None:
            relay = self.sandbox.socket_mode
            assert relay is not None
            relay.send("events_api", body)
            return Reply(200, "")
        return self.post(json.dumps(body), content_type="application/json")

    def click_in_view(self, *, user: str, view_id: str, element: dict[str, Any]) -> Reply:
        """Press a button inside an open modal (``block_actions`` with a view container)."""
        view = {**self.sandbox.state.views[view_id].view, "id": view_id}
        payload = {
            "type": "block_actions",
            "user": self._user(user, None),
            "api_app_id": "A0SANDBOX",
            "token": "legacy-verification-token",
            "container": {"type": "view", "view_id": view_id},
            "trigger_id": self.sandbox.state.issue_trigger(user),
            "team": {"id": self.team_id, "domain": "sandbox"},
            "enterprise": None,
            "is_enterprise_install": False,
            "view": view,
            "actions": [
                {
                    "type": "button",
                    "action_id": element["action_id"],
                    "block_id": element.get("block_id", "nav"),
                    "value": element.get("value", ""),
                    "text": element["text"],
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        return self._deliver("interactive", payload)

    def submit_view(
        self, *, user: str, view_id: str, values: dict[str, dict[str, str | dict[str, Any]]]
    ) -> Reply:
        """Submit an open modal as Slack does: every input with its current value (initial
        values unless ``values`` changes them: block_id -> {action_id: text or element state})."""
        record = self.sandbox.state.views[view_id]
        state = _initial_state(record.view)
        for block, inputs in values.items():
            for action, value in inputs.items():
                if isinstance(value, dict):
                    state.setdefault(block, {})[action] = value
                else:
                    state.setdefault(block, {})[action] = {
                        "type": "plain_text_input",
                        "value": value,
                    }
        view = {
            **record.view,
            "id": view_id,
            "team_id": self.team_id,
            "state": {"values": state},
            "hash": f"h{view_id}",
            "app_id": "A0SANDBOX",
            "bot_id": "B0BOT",
        }
        payload = {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": "sandbox"},
            "user": self._user(user, None),
            "api_app_id": "A0SANDBOX",
            "token": "legacy-verification-token",
            "trigger_id": self.sandbox.state.issue_trigger(user),
            "view": view,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        reply = self._deliver("interactive", payload)
        if reply.status == 200 and not (reply.body and "errors" in reply.body):
            self.sandbox.state.change(lambda: setattr(record, "open", False))
        return reply


def _initial_state(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    state: dict[str, dict[str, Any]] = {}
    for block in view.get("blocks", []):
        if block.get("type") != "input":
            continue
        element = block["element"]
        kind = element["type"]
        if kind in ("static_select", "radio_buttons"):
            value: dict[str, Any] = {"type": kind, "selected_option": element.get("initial_option")}
        else:
            value = {"type": kind, "value": element.get("initial_value")}
        state[block["block_id"]] = {element["action_id"]: value}
    return state
