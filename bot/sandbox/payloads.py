"""What Slack sends an app when its users act: slash command forms, button clicks on messages and
in modals, modal submissions and Events API callbacks, shaped as Slack shapes them. Kept apart
from delivering them (``driver``), which owns the sandbox's side effects (triggers, URLs)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bot.sandbox.state import Message


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


def slash_command(
    *,
    user: dict[str, Any],
    channel: str,
    text: str,
    command: str,
    response_url: str,
    trigger_id: str,
) -> dict[str, str]:
    """The form a slash command POSTs; ``user`` as ``SlackDriver`` describes people."""
    return {
        "token": "legacy-verification-token",
        "team_id": user["team_id"],
        "team_domain": "sandbox",
        "channel_id": channel,
        "channel_name": channel.lower(),
        "user_id": user["id"],
        "user_name": user["name"],
        "command": command,
        "text": text,
        "api_app_id": "A0SANDBOX",
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def block_actions(
    *,
    user: dict[str, Any],
    message: Message,
    button: Button,
    trigger_id: str,
    response_url: str,
) -> dict[str, Any]:
    """A button pressed on a message, in ``user``'s workspace."""
    return {
        "type": "block_actions",
        "user": user,
        "api_app_id": "A0SANDBOX",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
            "thread_ts": message.thread_ts,
        },
        "trigger_id": trigger_id,
        "team": {"id": user["team_id"], "domain": "sandbox"},
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
        "response_url": response_url,
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


def view_block_actions(
    *,
    user: dict[str, Any],
    view_id: str,
    view: dict[str, Any],
    element: dict[str, Any],
    trigger_id: str,
) -> dict[str, Any]:
    """A button pressed inside an open modal (``block_actions`` with a view container)."""
    return {
        "type": "block_actions",
        "user": user,
        "api_app_id": "A0SANDBOX",
        "token": "legacy-verification-token",
        "container": {"type": "view", "view_id": view_id},
        "trigger_id": trigger_id,
        "team": {"id": user["team_id"], "domain": "sandbox"},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": {**view, "id": view_id},
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


def view_submission(
    *,
    user: dict[str, Any],
    view_id: str,
    view: dict[str, Any],
    values: dict[str, dict[str, str | dict[str, Any]]],
    trigger_id: str,
) -> dict[str, Any]:
    """A modal submitted as Slack submits it: every input with its current value (initial
    values unless ``values`` changes them: block_id -> {action_id: text or element state})."""
    state = _initial_state(view)
    for block, inputs in values.items():
        for action, value in inputs.items():
            if isinstance(value, dict):
                state.setdefault(block, {})[action] = value
            else:
                state.setdefault(block, {})[action] = {
                    "type": "plain_text_input",
                    "value": value,
                }
    team_id = user["team_id"]
    submitted = {
        **view,
        "id": view_id,
        "team_id": team_id,
        "state": {"values": state},
        "hash": f"h{view_id}",
        "app_id": "A0SANDBOX",
        "bot_id": "B0BOT",
    }
    return {
        "type": "view_submission",
        "team": {"id": team_id, "domain": "sandbox"},
        "user": user,
        "api_app_id": "A0SANDBOX",
        "token": "legacy-verification-token",
        "trigger_id": trigger_id,
        "view": submitted,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def event_callback(*, team_id: str, event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An Events API callback's body."""
    return {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": "A0SANDBOX",
        "event": {**event, "event_ts": f"{time.time():.6f}"},
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
    }


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
