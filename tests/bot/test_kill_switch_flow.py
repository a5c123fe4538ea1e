"""The kill switch end to end over signed HTTP: an admin pauses with ``/approvals pause``, the
escalation channel hears it, nobody can approve, and ``/approvals resume`` lets it run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agent_runtime.authorization import Refusal
from agent_runtime.kill_switch import SwitchOutcome
from agent_runtime.policy import BUNDLED_POLICY
from bot.errors import REFUSALS, SWITCH_ANSWERS
from bot.sandbox import people
from bot.switch_cli import run_switch
from tests.bot.flows import SEND, button, ephemeral_for, result_message, start_run
from tests.conftest import Harness

ESCALATION = "C0ESCALATE"


def policy_with_escalation(tmp_path: Path) -> Path:
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["defaults"]["escalation_channel"] = ESCALATION
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return path


def approvals(h: Harness, user: str, text: str) -> dict[str, Any]:
    before = len(h.state.responses)
    reply = h.driver.slash_command(
        user=user, channel=people.CHANNEL, text=text, command="/approvals"
    )
    assert reply.status == 200, reply
    return h.state.wait_for(lambda: h.state.responses[before:] and h.state.responses[-1])


def test_pause_stops_approvals_until_an_admin_resumes(serve_bot, sqlite_url, tmp_path):
    h = serve_bot(sqlite_url, policy_file=policy_with_escalation(tmp_path))
    root, card = start_run(h, SEND)

    refused = approvals(h, people.RELEASE_MANAGER, "pause because")
    assert refused["text"] == SWITCH_ANSWERS[SwitchOutcome.NOT_ALLOWED]
    paused = approvals(h, people.ADMIN, "pause incident 42: bad deploy")
    assert paused["text"] == SWITCH_ANSWERS[SwitchOutcome.PAUSED]
    (announced,) = h.state.wait_for(lambda: h.state.top_level(ESCALATION))
    assert f"paused* by <@{people.ADMIN}>" in str(announced.blocks)
    assert "incident 42: bad deploy" in str(announced.blocks)

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS[Refusal.EXECUTION_PAUSED]
    assert h.bot.settle(timeout=30)
    assert h.workspace.effects() == []

    assert approvals(h, people.ADMIN, "resume")["text"] == SWITCH_ANSWERS[SwitchOutcome.RESUMED]
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert "message sent to partner@example.com" in result_message(h, root).text
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]
    assert len(h.state.top_level(ESCALATION)) == 2  # paused, resumed


def test_a_pause_from_a_shell_is_announced_with_the_one_bot_token(
    serve_bot, sqlite_url, tmp_path, capsys
):
    h = serve_bot(sqlite_url, policy_file=policy_with_escalation(tmp_path))
    assert run_switch(h.bot.settings, h.bot.db, pause=True, reason="disk full") == 0
    capsys.readouterr()
    (announced,) = h.state.top_level(ESCALATION)
    assert announced.team_id == h.state.team_id and "disk full" in str(announced.blocks)
    assert h.state.calls.count("chat.postMessage") == 1
