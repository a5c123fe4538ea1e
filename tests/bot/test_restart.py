"""A paused run survives the bot process: kill it, start a new one on the same database, approve."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.agents.workspace import Workspace
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from tests.bot.flows import SEND


@pytest.fixture
def sandbox() -> Iterator[SlackSandbox]:
    box = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    yield box
    box.stop()


def test_run_resumes_after_the_bot_process_is_killed(migrated_pg_url, sandbox, tmp_path: Path):
    env = bot_env(sandbox, migrated_pg_url, tmp_path / "workspace")
    state = sandbox.state
    first = BotProcess(env, sandbox)
    try:
        first.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(
            lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
        )
    finally:
        first.kill()

    second = BotProcess(env, sandbox)
    try:
        approve = next(b for b in buttons(card) if b.text == "Approve")
        reply = second.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
        assert reply.status == 200
        result = state.wait_for(
            lambda: next(
                (m for m in state.thread(people.CHANNEL, root.ts) if m.text.startswith("Run ")),
                None,
            ),
            timeout=60,
        )
    finally:
        returncode = second.stop()

    assert "message sent to partner@example.com" in result.text
    effects = Workspace(tmp_path / "workspace").effects()
    assert [e["tool"] for e in effects] == ["send_external_message"]
    assert returncode == 0, "SIGTERM stops the bot cleanly"


def test_sigterm_finishes_the_resume_in_flight_before_exiting(
    migrated_pg_url, sandbox, tmp_path: Path
):
    env = bot_env(sandbox, migrated_pg_url, tmp_path / "workspace")
    state = sandbox.state
    bot = BotProcess(env, sandbox)
    bot.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=SEND)
    root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
    card = state.wait_for(
        lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
    )
    approve = next(b for b in buttons(card) if b.text == "Approve")
    assert bot.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve).status == 200
    assert bot.stop() == 0  # SIGTERM right after the ack, while the resume runs

    thread = [m.text for m in state.thread(people.CHANNEL, root.ts)]
    assert any(t.startswith("Run finished") for t in thread), "the run was finished before exit"
    effects = Workspace(tmp_path / "workspace").effects()
    assert [e["tool"] for e in effects] == ["send_external_message"]


SYS_TGKILL = 234  # x86_64


@pytest.mark.skipif(platform.machine() != "x86_64", reason="tgkill's number is x86_64's")
def test_sigterm_delivered_to_any_thread_stops_the_bot(sqlite_url, sandbox, tmp_path: Path):
    """The kernel may hand a process's SIGTERM to any of its threads; the bot must still
    drain and exit (a main thread blocked forever on an event never runs the handler)."""
    bot = BotProcess(bot_env(sandbox, sqlite_url, tmp_path / "workspace"), sandbox)
    pid = bot.proc.pid
    other = next(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(SYS_TGKILL, pid, other, signal.SIGTERM) == 0, ctypes.get_errno()
    try:
        assert bot.proc.wait(timeout=30) == 0
    finally:
        if bot.proc.poll() is None:
            bot.kill()
