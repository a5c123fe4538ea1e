"""Operators' own graphs behind the bot, the publish workflow's card, and model start-up errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_runtime.errors import AgentLoadError
from agent_runtime.graph_runtime import resolve_model
from bot.sandbox import people
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.text import verbatim
from examples import plain_graph
from tests.agent_runtime.scripted_grader import REGIONS, SUMMARY
from tests.bot.flows import button, result_message, start_run


def test_a_plain_langgraph_graph_is_gated_and_resumed_end_to_end(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, agent="examples.plain_graph:build_graph")
    before = len(plain_graph.REFUNDS)
    root, card = start_run(h, "refund 40 euros to the customer")
    shown = json.dumps(card.blocks)
    assert "refund_customer" in shown and "amount_eur" in shown
    assert len(plain_graph.REFUNDS) == before, "nothing runs before approval"

    h.driver.click(user=people.REQUESTER, message=card, button=button(card, "Approve"))
    h.state.wait_for(lambda: h.state.ephemerals_for(people.REQUESTER))
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    assert "Refunded 40 EUR." in result_message(h, root).text
    assert plain_graph.REFUNDS[before:] == [{"customer": "C-1042", "amount_eur": 40}]


def test_a_module_level_compiled_graph_gets_the_bots_checkpointer_end_to_end(serve_bot, sqlite_url):
    """``AGENT=module:graph`` naming a graph compiled without a checkpointer, as langgraph.json
    does: the bot pauses it on the card, and resumes it on approval."""
    h = serve_bot(sqlite_url, agent="tests.agent_runtime.custom_graphs:REFUND_GRAPH")
    before = len(plain_graph.REFUNDS)
    root, card = start_run(h, "refund 25 euros to the customer")
    assert "refund_customer" in json.dumps(card.blocks)
    assert h.bot.runtime.graph.checkpointer is h.bot.runtime.checkpointer

    h.driver.click(user=people.REQUESTER, message=card, button=button(card, "Approve"))
    h.state.wait_for(lambda: h.state.ephemerals_for(people.REQUESTER))
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    assert "Refunded 25 EUR." in result_message(h, root).text
    assert plain_graph.REFUNDS[before:] == [{"customer": "C-1042", "amount_eur": 25}]


def test_the_publish_card_shows_verdict_criteria_and_hash(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, agent="agent_runtime.agents.publish_workflow:build_agent")
    root, card = start_run(h, "Weekly sales report")
    shown = json.dumps(card.blocks)
    assert "Rubric verdict: `satisfied`" in shown
    for criterion in ("has a summary section", "covers every region", "no placeholders"):
        assert criterion in shown
    assert "Content hash (sha256)" in shown
    for reviewer in (people.RELEASE_MANAGER, people.RELEASE_MANAGER_2):
        h.driver.click(user=reviewer, message=card, button=button(card, "Approve"))
    assert "Report published" in result_message(h, root).text


def test_with_a_model_the_card_shows_the_llm_judges_verdict_per_criterion(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, agent="tests.agent_runtime.custom_graphs:llm_revise_then_satisfied")
    root, card = start_run(h, "Weekly sales report")
    evidence = next(t for t in block_texts(card.blocks) if t.startswith("*Evidence*"))
    assert evidence.splitlines()[1:4] == [
        "Rubric verdict: `satisfied`  ·  graded by `model`, evaluation 2",
        f":white_check_mark: {verbatim(SUMMARY, 120)}",
        f":white_check_mark: {verbatim(REGIONS, 120)}",
    ]
    for reviewer in (people.RELEASE_MANAGER, people.RELEASE_MANAGER_2):
        h.driver.click(user=reviewer, message=card, button=button(card, "Approve"))
    assert "Report published" in result_message(h, root).text


def block_texts(blocks: list[dict]) -> list[str]:  # type: ignore[type-arg]
    found = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            found.append(str(text.get("text", "")))
        found += block_texts([e for e in block.get("elements", []) if isinstance(e, dict)])
    return found


@pytest.mark.parametrize(
    ("spec", "env", "message"),
    [
        ("openai:gpt-4o-mini", {}, "needs the langchain-openai package: pip install"),
        ("anthropic:claude-sonnet-4-5", {}, "needs ANTHROPIC_API_KEY in the environment"),
        ("nosuchprovider:model", {}, "cannot be used: Unable to infer model provider"),
        ("no-provider-known", {}, "cannot be used: Unable to infer model provider"),
    ],
)
def test_a_missing_provider_package_or_key_is_one_clear_line(monkeypatch, spec, env, message):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AgentLoadError) as err:
        resolve_model(spec)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_provider_with_its_key_loads(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    assert type(resolve_model("anthropic:claude-sonnet-4-5")).__name__ == "ChatAnthropic"


def serve_once(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """``approval-bot serve`` as operators run it (a traceback would show) against the Slack
    sandbox, with no API keys; it times out if it starts serving."""
    sandbox = SlackSandbox().start()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        SLACK_BOT_TOKEN=SANDBOX_TOKEN,
        SLACK_SIGNING_SECRET="s",
        SLACK_API_URL=sandbox.api_url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}",
        WORKSPACE_DIR=str(tmp_path / "w"),
        **settings,
    )
    try:
        return subprocess.run(
            [sys.executable, "-m", "bot", "serve", "--port", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        sandbox.stop()


def test_serve_with_a_model_but_no_key_stops_with_one_line(tmp_path):
    done = serve_once(tmp_path, AGENT_MODEL="anthropic:claude-sonnet-4-5")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "approval-bot: AGENT_MODEL 'anthropic:claude-sonnet-4-5' needs ANTHROPIC_API_KEY in the "
        "environment"
    )


def test_serve_refuses_a_factory_that_raises_in_one_line(tmp_path):
    done = serve_once(tmp_path, AGENT="tests.agent_runtime.custom_graphs:raising_factory")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "approval-bot: AGENT 'tests.agent_runtime.custom_graphs:raising_factory' failed to "
        "build the graph: RuntimeError: the model registry is unreachable"
    )
