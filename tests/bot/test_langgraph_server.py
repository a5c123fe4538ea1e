"""The bot as the approval gate in front of a real LangGraph Server (``langgraph dev``, offline):
runs start there, interrupts are read and resumed through langgraph-sdk, each effect happens
once, and the server-side gate shares the bot's PostgreSQL database.

One server for the module; every test starts its own run with its own message text, so the
shared workspace's effects are told apart by that text."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from langgraph.types import Command
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import InternalServerError
from sqlalchemy import select

from agent_runtime.agents.workspace import Workspace
from agent_runtime.call_identity import server_thread_id
from agent_runtime.errors import AgentLoadError
from agent_runtime.remote_runtime import RemoteRunFailed
from bot.errors import REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from bot.settings import ConfigError, load_settings
from store.audit_models import AuditEvent
from store.db import Database
from store.models import ApprovalRequest, Decision, Run
from tests.bot.flows import (
    button,
    card_now,
    cards_in,
    result_message,
    results_in,
    settled,
    start_run,
)
from tests.conftest import Harness

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "langgraph_server" / "langgraph.json"
LANGGRAPH = Path(sys.executable).with_name("langgraph")  # the dev extra's langgraph-cli
READY_WITHIN = 90.0
REVIEWERS = [people.RELEASE_MANAGER, people.RELEASE_MANAGER_2, people.SECURITY]


@dataclass
class Server:
    url: str
    database_url: str
    workspace: Workspace

    def effects(self, text: str) -> list[str]:
        """The tools that ran for one test (by the message text it sent)."""
        return [e["tool"] for e in self.workspace.effects() if e.get("text") == text]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll /ok until the server answers (or died, or took too long)."""
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("langgraph dev exited:\n" + log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(url + "/ok", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("langgraph dev did not answer /ok:\n" + log.read_text()[-3000:])


@pytest.fixture(scope="module")
def module_pg_url(pg_admin_url: str) -> Iterator[str]:
    name = f"approval_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = pg_admin_url.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def server(module_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("langgraph_server")
    workspace = Workspace(home / "workspace").ensure()
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "APPROVAL_BOT_", "LANGSMITH_", "LANGCHAIN_"))
    }
    env.update(
        DATABASE_URL=module_pg_url,
        WORKSPACE_DIR=str(workspace.root),
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGSMITH_TRACING="false",
    )
    # The dev server keeps its files in its working directory: run it in a temporary one, on
    # the example's configuration with the graph's path made absolute.
    config = json.loads(CONFIG.read_text())
    config["graphs"] = {
        name: f"{(CONFIG.parent / spec).resolve()}" for name, spec in config["graphs"].items()
    }
    (home / "langgraph.json").write_text(json.dumps(config))
    log = home / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(LANGGRAPH),
                "dev",
                "--no-browser",
                "--no-reload",
                "--allow-blocking",
                "--port",
                str(port),
                "--config",
                str(home / "langgraph.json"),
            ],
            cwd=home,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log)
        yield Server(url=url, database_url=module_pg_url, workspace=workspace)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _send(text: str) -> str:
    return "send_external_message " + json.dumps({"recipient": "partner@example.com", "text": text})


def _run_of(db: Database, text: str) -> Run:
    with db.transaction() as s:
        return s.scalars(select(Run).where(Run.request_text.contains(text))).one()


def test_start_approve_resumes_once_on_the_server(serve_bot, server: Server):
    h = serve_bot(server.database_url, langgraph_url=server.url)
    text = f"approve {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    assert "send_external_message" in card.text
    assert server.effects(text) == [], "nothing runs before the approval"

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result = result_message(h, root)
    assert "message sent to partner@example.com" in result.text
    assert server.effects(text) == ["send_external_message"]
    assert f"<@{people.RELEASE_MANAGER}> approved" in json.dumps(card_now(h, card).blocks)
    with h.bot.db.transaction() as s:
        run = s.scalars(select(Run).where(Run.request_text.contains(text))).one()
        kinds = s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run.id)).all()
    assert kinds.count("resumed") == 1
    assert kinds.count("tool_outcome") == 1


def test_reject_with_a_reason_reaches_the_agent(serve_bot, server: Server):
    h = serve_bot(server.database_url, langgraph_url=server.url)
    text = f"reject {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Reject"))
    modal = h.state.wait_for(lambda: h.state.open_views(people.SECURITY))[-1]
    h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"reject_reason": {"reason": "Not today"}}
    )
    result = result_message(h, root)
    assert "rejected" in result.text and "Not today" in result.text
    assert server.effects(text) == []


def test_twenty_concurrent_approvals_on_two_replicas_run_the_tool_once(serve_bot, server: Server):
    h = serve_bot(server.database_url, langgraph_url=server.url)
    other = serve_bot(server.database_url, sandbox=h.sandbox, langgraph_url=server.url)
    text = f"concurrent {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    approve = button(card, "Approve")
    clicks = [(REVIEWERS[i % len(REVIEWERS)], (h, other)[i % 2]) for i in range(20)]
    barrier = threading.Barrier(len(clicks))

    def click(job: tuple[str, Harness]) -> int:
        user, replica = job
        barrier.wait()
        return replica.driver.click(user=user, message=card, button=approve).status

    with ThreadPoolExecutor(max_workers=len(clicks)) as pool:
        assert list(pool.map(click, clicks)) == [200] * 20
    result_message(h, root)
    told = h.state.wait_for(lambda: len(h.state.ephemerals) >= 19 and list(h.state.ephemerals))
    assert {e.text for e in told} == {REFUSALS["already_decided"]}
    assert server.effects(text) == ["send_external_message"]
    run = _run_of(h.bot.db, text)
    with h.bot.db.transaction() as s:
        kinds = s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run.id)).all()
        decisions = s.scalars(
            select(Decision).join(ApprovalRequest).where(ApprovalRequest.run_id == run.id)
        ).all()
    assert kinds.count("resumed") == 1
    assert len(decisions) == 1


def test_a_resume_bound_to_another_interrupt_answers_nothing(serve_bot, server: Server):
    """A resume names the interrupt it answers: sent for any other id (an older interrupt,
    say), the server leaves the waiting one as it was, the resume is reported as answering
    nothing, and the card still works."""
    h = serve_bot(server.database_url, langgraph_url=server.url)
    text = f"bound {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    run = _run_of(h.bot.db, text)
    (waiting,) = h.bot.runtime.state(run.id).interrupts
    stray = Command(resume={uuid.uuid4().hex: {"decisions": [{"type": "approve"}]}})
    with pytest.raises(RemoteRunFailed, match="the resume answered nothing"):
        h.bot.runtime.invoke(stray, run.id)
    assert [i.id for i in h.bot.runtime.state(run.id).interrupts] == [waiting.id]
    assert server.effects(text) == []

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert "message sent" in result_message(h, root).text
    assert server.effects(text) == ["send_external_message"]


def test_an_interrupt_answered_on_the_server_meanwhile_is_not_called_resumed(
    serve_bot, server: Server, monkeypatch
):
    """Someone answers the interrupt directly on the server (a reject) between the bot's check
    of the thread and its resume: the bot's resume then answers nothing. The bot must not
    record the approval as resumed nor post the other run's outcome as its own."""
    h = serve_bot(server.database_url, langgraph_url=server.url)
    text = f"meanwhile {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    run = _run_of(h.bot.db, text)
    threads = h.bot.runtime.client.threads  # type: ignore[attr-defined]
    get_state = threads.get_state
    other = get_sync_client(url=server.url, api_key=None)
    armed = [True]

    def then_answered_elsewhere(thread_id: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        state = get_state(thread_id, *args, **kwargs)
        if armed and state.get("interrupts"):
            armed.clear()
            (waiting,) = state["interrupts"]
            answer = {"decisions": [{"type": "reject", "message": "answered elsewhere"}]}
            direct = other.runs.create(
                thread_id, "agent", command={"resume": {waiting["id"]: answer}}
            )
            other.runs.join(thread_id, direct["run_id"])
        return state

    monkeypatch.setattr(threads, "get_state", then_answered_elsewhere)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result = result_message(h, root)
    assert not armed, "the interrupt was answered on the server"
    assert server.effects(text) == []
    with h.bot.db.transaction() as s:
        kinds = s.scalars(select(AuditEvent.kind).where(AuditEvent.run_id == run.id)).all()
        status = s.scalars(
            select(ApprovalRequest.status).where(ApprovalRequest.run_id == run.id)
        ).one()
    assert "resumed" not in kinds and status == "failed"
    assert "answered nothing" in result.text


def test_an_approval_spent_on_the_server_before_the_bots_check_is_not_called_unresumed(
    serve_bot, server: Server, monkeypatch
):
    """Someone resumes the thread directly on the server (approving) once the approval is
    claimed, just before the bot reads the thread: the server's gate lets the approved call
    run (it is being resumed), and the bot then finds no interrupt waiting. It must not tell
    the requester that the run failed unresumed while the message was sent."""
    h = serve_bot(server.database_url, langgraph_url=server.url)
    text = f"spent {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    run = _run_of(h.bot.db, text)
    threads = h.bot.runtime.client.threads  # type: ignore[attr-defined]
    get_state = threads.get_state
    other = get_sync_client(url=server.url, api_key=None)
    armed = [True]

    def answered_elsewhere_first(thread_id: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if armed:
            armed.clear()
            (waiting,) = get_state(thread_id)["interrupts"]
            answer = {"decisions": [{"type": "approve"}]}
            direct = other.runs.create(
                thread_id,
                "agent",
                command={"resume": {waiting["id"]: answer}},
                config={"configurable": {"approval_run_id": run.id}},  # as on the card
            )
            other.runs.join(thread_id, direct["run_id"])
        return get_state(thread_id, *args, **kwargs)

    monkeypatch.setattr(threads, "get_state", answered_elsewhere_first)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))

    def closed() -> str | None:
        with h.bot.db.transaction() as s:
            status = s.scalars(
                select(ApprovalRequest.status).where(ApprovalRequest.run_id == run.id)
            ).one()
        return None if status in ("pending", "resuming") else status

    status = h.state.wait_for(closed)
    assert not armed
    assert server.effects(text) == ["send_external_message"]
    assert status == "resolved"
    assert "nothing ran" not in card_now(h, card).text
    assert "message sent to partner@example.com" in result_message(h, root).text


def _gateway(status: int) -> InternalServerError:
    """What a proxy in front of the server answers when it gave up waiting for it."""
    request = httpx.Request("POST", "http://proxy.internal/runs")
    response = httpx.Response(status, request=request)
    return InternalServerError(f"{status} {response.reason_phrase}", response=response, body=None)


@pytest.mark.parametrize(
    ("lost", "cut_short"),
    [
        (httpx.ReadError("connection reset"), httpx.ReadTimeout("timed out")),
        # A load balancer's idle timeout cuts a long wait with a 504 (a 502 on the creation):
        # the run goes on behind it all the same.
        (_gateway(502), _gateway(504)),
    ],
    ids=["connection", "gateway"],
)
def test_answers_lost_on_the_way_back_from_the_server_are_not_failures(
    serve_bot, server: Server, monkeypatch, lost, cut_short
):
    """Every run's creation goes through but its answer is lost, and the first wait for each
    run is cut short: each run is found and waited for again, none is created twice."""
    h = serve_bot(server.database_url, langgraph_url=server.url)
    runs = h.bot.runtime.client.runs  # type: ignore[attr-defined]
    create, join = runs.create, runs.join
    cut: set[str] = set()

    def lost_create(*args, **kwargs):  # type: ignore[no-untyped-def]
        create(*args, **kwargs)
        raise lost

    def cut_join(thread_id: str, run_id: str):  # type: ignore[no-untyped-def]
        if run_id not in cut:
            cut.add(run_id)
            raise cut_short
        return join(thread_id, run_id)

    monkeypatch.setattr(runs, "create", lost_create)
    monkeypatch.setattr(runs, "join", cut_join)
    text = f"lost {uuid.uuid4().hex}"
    root, card = start_run(h, _send(text))
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert "message sent" in result_message(h, root).text
    assert server.effects(text) == ["send_external_message"]
    run = _run_of(h.bot.db, text)
    assert len(runs.list(server_thread_id(run.id))) == 2 == len(cut)


def test_a_subagent_interrupt_is_reviewed_and_resumed(serve_bot, server: Server):
    h = serve_bot(server.database_url, langgraph_url=server.url)
    text = f"subagent {uuid.uuid4().hex}"
    task = {"description": _send(text), "subagent_type": "release-coordinator"}
    root, card = start_run(h, "task " + json.dumps(task))
    assert "from subagent `release-coordinator`" in json.dumps(card.blocks)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert server.effects(text) == ["send_external_message"]


@pytest.mark.parametrize("point", ["after_claim", "after_resume_sent"])
def test_a_bot_killed_mid_approval_is_finished_once_by_the_next(point, server: Server, tmp_path):
    """Killed with the decision recorded: before the resume reached the server, or once the
    server had the resume run. The next process resumes only what the server did not consume:
    one resume run on the server, one effect."""
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    state = sandbox.state
    text = f"restart {point} {uuid.uuid4().hex}"
    ws = tmp_path / "workspace"
    env = bot_env(
        sandbox, server.database_url, ws, LANGGRAPH_URL=server.url, APPROVAL_BOT_FAULT=point
    )
    crashing = BotProcess(env, sandbox)
    try:
        crashing.driver.slash_command(
            user=people.REQUESTER, channel=people.CHANNEL, text=_send(text)
        )
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(lambda: next((m for m in cards_in(state, root) if buttons(m)), None))
        approve = button(card, "Approve")
        crashing.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
        assert crashing.proc.wait(timeout=60) == -9, f"the bot should have died at {point}"
    finally:
        if crashing.proc.poll() is None:
            crashing.kill()
    survivor = BotProcess(
        bot_env(sandbox, server.database_url, ws, LANGGRAPH_URL=server.url), sandbox
    )
    try:
        state.wait_for(lambda: settled(state, root, card=card), timeout=60)
    finally:
        survivor.stop()
        sandbox.stop()
    (result,) = results_in(state, root)
    assert "message sent to partner@example.com" in result.text
    assert server.effects(text) == ["send_external_message"]
    db = Database(server.database_url)
    with db.transaction() as s:
        run = s.scalars(select(Run).where(Run.request_text.contains(text))).one()
        statuses = s.scalars(
            select(ApprovalRequest.status).where(ApprovalRequest.run_id == run.id)
        ).all()
    db.dispose()
    assert statuses == ["resolved"]
    client = get_sync_client(url=server.url, api_key=None)
    runs = client.runs.list(server_thread_id(run.id))
    assert len(runs) == 2, "the start and one resume, whoever sent it"


def test_start_up_names_an_unknown_assistant(serve_bot, server: Server):
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    try:
        with pytest.raises(AgentLoadError, match=r"^LANGGRAPH_ASSISTANT 'nope': no such"):
            serve_bot(
                server.database_url,
                sandbox=sandbox,
                langgraph_url=server.url,
                langgraph_assistant="nope",
            )
    finally:
        sandbox.stop()


def test_the_api_key_is_never_shown_and_the_url_is_checked(server: Server):
    settings = load_settings(langgraph_url=server.url, langgraph_api_key="lg-secret-key")
    assert "lg-secret-key" not in repr(settings)
    with pytest.raises(ConfigError, match=r"^LANGGRAPH_URL: must be an http"):
        load_settings(langgraph_url="localhost:2024")
