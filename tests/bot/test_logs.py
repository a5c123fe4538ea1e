"""``LOG_FORMAT=json``: one JSON object per line, each approval traceable by its ids, no token."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import trace
from bot import logs
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from store.db import Database
from store.models import ApprovalRequest


@pytest.fixture
def sandbox():
    box = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    yield box
    box.stop()


def test_a_whole_approval_is_traceable_in_json_lines(sandbox, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    env = bot_env(sandbox, url, tmp_path / "workspace", LOG_FORMAT="json")
    state = sandbox.state
    bot = BotProcess(env, sandbox)
    try:
        send = 'send_external_message {"recipient": "a@example.com", "text": "hi"}'
        bot.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=send)
        root = state.wait_for(lambda: next(iter(state.top_level(people.CHANNEL)), None))
        card = state.wait_for(
            lambda: next((m for m in state.thread(people.CHANNEL, root.ts) if buttons(m)), None)
        )
        approve = next(b for b in buttons(card) if b.text == "Approve")
        bot.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve)
        state.wait_for(
            lambda: any(m.text.startswith("Run ") for m in state.thread(people.CHANNEL, root.ts))
        )
    finally:
        assert bot.stop() == 0
    db = Database(url)
    with db.transaction() as s:
        request = s.query(ApprovalRequest).one()
        request_id, run_id = request.id, request.run_id
    db.dispose()

    lines = [json.loads(line) for line in bot.log]  # every line is one JSON object
    assert all({"timestamp", "level", "logger", "message"} <= set(line) for line in lines)
    mine = [line for line in lines if line.get("request_id") == request_id]
    events = [line.get("event") for line in mine]
    for kind in ("interrupt_recorded", "decision_recorded", "resumed"):
        assert kind in events, (kind, events)
    decided = next(line for line in mine if line.get("event") == "decision_recorded")
    assert decided["actor"] == people.RELEASE_MANAGER
    assert decided["run_id"] == run_id
    finished = [line for line in lines if line.get("run_id") == run_id]
    assert "run_completed" in [line.get("event") for line in finished]
    text = "\n".join(bot.log)
    assert SANDBOX_TOKEN not in text
    assert env["SLACK_SIGNING_SECRET"] not in text


@pytest.fixture
def configured() -> Iterator[None]:
    """``logs.configure`` may be called; the root logger is as it was afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        logs.stop()
        root.handlers[:], root.level = saved


def test_token_shaped_text_is_masked_and_bound_ids_are_added(capsys, configured):
    logs.configure(level=logging.INFO, fmt="json")
    with trace.bind(request_id="req-1", actor="U1"):
        logging.getLogger("approval-bot.test").info("token %s refused", "xoxb-1-2-abc")
    logs.stop()  # every line queued is written
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["message"] == "token xoxb-*** refused"
    assert (line["request_id"], line["actor"], line["level"]) == ("req-1", "U1", "INFO")


def test_an_exception_logged_keeps_its_traceback_in_both_formats(capsys, configured):
    for fmt in ("json", "text"):
        logs.configure(level=logging.INFO, fmt=fmt)
        try:
            raise ValueError("bad payload")
        except ValueError:
            logging.getLogger("approval-bot.test").exception("could not store %s", "an item")
        logs.stop()
        err = capsys.readouterr().err
        if fmt == "json":
            line = json.loads(err.strip().splitlines()[-1])
            assert line["message"] == "could not store an item"
            assert "ValueError: bad payload" in line["exc_info"]
        else:
            assert "could not store an item" in err
            assert "Traceback" in err and "ValueError: bad payload" in err


class _StuckOutput(io.StringIO):
    """An output (a pipe to a log collector that stopped reading) whose writes wait until it
    is opened again."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.opened = threading.Event()

    def write(self, text: str) -> int:
        self.entered.set()
        assert self.opened.wait(30), "the test never opened the output"
        return super().write(text)


def _log_from_a_thread(lines: list[str]) -> threading.Event:
    """Log ``lines`` from a thread of their own (as a click's work would); set once all the
    calls returned."""
    done = threading.Event()

    def work() -> None:
        for line in lines:
            logging.getLogger("approval-bot.test").info(line)
        done.set()

    threading.Thread(target=work, daemon=True).start()
    return done


def test_a_log_call_never_waits_for_a_stuck_output(monkeypatch, configured):
    """A click's thread logs (its audit events, a warning): if the log's output stops taking
    lines, the click still goes on. The lines are written once the output takes them again,
    in order."""
    out = _StuckOutput()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO)
    first = _log_from_a_thread(["first"])
    assert out.entered.wait(10), "the first line never reached the output"
    assert first.wait(10), "the log call waited for the output"
    more = _log_from_a_thread(["second", "third"])
    assert more.wait(10), "a log call waited for the output"
    seen = ["pending"]  # the line says what was true when it was logged, not when written
    logging.getLogger("approval-bot.test").info("status %s", seen)
    seen[0] = "resolved"
    out.opened.set()
    logs.stop()
    written = [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]
    assert written == ["first", "second", "third", "status ['pending']"]


def test_lines_the_output_could_not_keep_up_with_are_dropped_and_counted(monkeypatch, configured):
    """The queue of lines is bounded: a stuck output costs lines, not the bot's memory, and
    the log says how many were lost."""
    out = _StuckOutput()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO, queue_size=3)
    first = _log_from_a_thread(["line 0"])
    assert out.entered.wait(10) and first.wait(10)
    rest = _log_from_a_thread([f"line {n}" for n in range(1, 10)])
    assert rest.wait(10), "a log call waited for the output"
    out.opened.set()
    logs.stop()
    written = [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]
    dropped = "6 log lines were dropped: the log's output did not keep up"
    assert written == ["line 0", dropped, "line 1", "line 2", "line 3"]
