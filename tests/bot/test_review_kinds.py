"""Roles per review kind: a sensitive file change goes to its own reviewers, other file changes
follow the tool's rule. Over signed HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent_runtime.authorization import Refusal
from agent_runtime.policy import BUNDLED_POLICY
from bot.errors import REFUSALS
from bot.sandbox import people
from tests.bot.flows import button, ephemeral_for, result_message, start_run

SENSITIVE = 'replace_text_file {"path": "config/app.env", "content": "FLAG=on"}'
PLAIN = 'replace_text_file {"path": "notes/todo.md", "content": "ship it"}'


def routed_policy(tmp_path: Path) -> Path:
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["roles"]["file-maintainers"] = {"users": [people.SECURITY]}
    policy["tools"]["replace_text_file"]["approvers"] = ["release-managers"]
    policy["reviews"] = {
        "sensitive_file_change": {"approvers": ["file-maintainers"], "risk": "high"}
    }
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return path


def test_a_sensitive_change_is_decided_by_its_own_reviewers_only(serve_bot, sqlite_url, tmp_path):
    h = serve_bot(sqlite_url, policy_file=routed_policy(tmp_path))
    root, card = start_run(h, SENSITIVE)
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert "sensitive_file_change" in shown and "file-maintainers" in shown

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS[Refusal.NOT_AN_APPROVER]
    assert h.workspace.effects() == []

    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["replace_text_file"]


def test_other_file_changes_follow_the_tools_rule(serve_bot, sqlite_url, tmp_path):
    h = serve_bot(sqlite_url, policy_file=routed_policy(tmp_path))
    root, card = start_run(h, PLAIN)
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.SECURITY) == REFUSALS[Refusal.NOT_AN_APPROVER]
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert [e["tool"] for e in h.workspace.effects()] == ["replace_text_file"]
