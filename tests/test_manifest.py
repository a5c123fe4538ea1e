"""The Slack app manifest asks for exactly the scopes the code's Web API calls need, and
declares every command, event and feature the bot serves."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml
from slack_sdk import WebClient

from bot.ids import APPROVALS_COMMAND, SLASH_COMMAND
from bot.installations import BOT_SCOPES

ROOT = Path(__file__).resolve().parents[1]
SERVED = ("bot", "agent_runtime", "store")
NOT_SERVED = ("bot/sandbox", "bot/demo.py")
"""The local Slack double and the offline demo call nothing on a real workspace."""

SCOPES = {
    # Web API method -> the bot scopes it needs (api.slack.com/methods/<method>)
    "auth_test": set(),
    "chat_getPermalink": set(),
    # chat:write.public: cards and notices go to review/notify channels the bot never joined
    "chat_postMessage": {"chat:write", "chat:write.public"},
    "chat_postEphemeral": {"chat:write"},
    "chat_update": {"chat:write"},
    # a card whose post timed out is looked for in public and private channels
    "conversations_history": {"channels:history", "groups:history"},
    "conversations_replies": {"channels:history", "groups:history"},
    "conversations_open": {"im:write"},
    # token rotation: an expiring bot token is exchanged with the app's client id and secret
    "oauth_v2_access": set(),
    "usergroups_users_list": {"usergroups:read"},
    "views_open": set(),
    "views_push": set(),
    "views_update": set(),
    "views_publish": set(),
}
FOR_FEATURES = {"commands"}
"""Slash commands need the ``commands`` scope, whatever the code calls."""


def called_methods() -> set[str]:
    """Every ``<something>.<Web API method>(...)`` call in the served packages."""
    methods = {name for name in dir(WebClient) if not name.startswith("_")}
    methods -= {"api_call", "send_socket_mode_response"}
    found: set[str] = set()
    for package in SERVED:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(NOT_SERVED):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in methods
                ):
                    found.add(node.func.attr)
    return found


def manifest() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "slack-manifest.yaml").read_text())


def test_every_method_the_code_calls_has_its_scopes_listed_here():
    unknown = called_methods() - set(SCOPES)
    assert not unknown, f"add these methods and their scopes to SCOPES: {sorted(unknown)}"


def test_the_manifest_asks_for_exactly_the_scopes_the_code_needs():
    needed = set().union(*(SCOPES[m] for m in called_methods())) | FOR_FEATURES
    assert set(manifest()["oauth_config"]["scopes"]["bot"]) == needed


def registered(kind: str) -> set[str]:
    """What listeners register with ``app.<kind>(...)`` in ``bot/listeners``: a literal, or
    the name of the constant it is given."""
    names: set[str] = set()
    for path in (ROOT / "bot" / "listeners").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == kind
                and node.args
            ):
                first = node.args[0]
                if isinstance(first, ast.Constant):
                    names.add(str(first.value))
                elif isinstance(first, ast.Name):
                    names.add(first.id)  # a constant of bot.ids
    return names


def test_the_manifest_declares_the_commands_and_events_the_listeners_serve():
    m = manifest()
    commands = {c["command"] for c in m["features"]["slash_commands"]}
    assert commands == {SLASH_COMMAND, APPROVALS_COMMAND}
    assert registered("command") == {"SLASH_COMMAND", "APPROVALS_COMMAND"}
    assert set(m["settings"]["event_subscriptions"]["bot_events"]) == registered("event")
    assert m["features"]["app_home"]["home_tab_enabled"] is True
    assert m["settings"]["interactivity"]["is_enabled"] is True


def test_installs_by_oauth_ask_for_the_manifest_scopes_and_come_back_to_the_redirect_path():
    m = manifest()
    assert set(BOT_SCOPES) == set(m["oauth_config"]["scopes"]["bot"])
    events = m["settings"]["interactivity"]["request_url"].removesuffix("/slack/events")
    assert m["oauth_config"]["redirect_urls"] == [events + "/slack/oauth_redirect"]
