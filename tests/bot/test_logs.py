"""Logs: one JSON object per line (``LOG_FORMAT=json``), each approval traceable by its ids,
no token; written by a thread of their own, so a slow or stuck output holds up no click and
no exit."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
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


class _StuckOutput(io.StringIO):
    """An output (a pipe to a log collector that stopped reading) whose writes wait until it
    is opened again."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.wrote = threading.Condition()

    def write(self, text: str) -> int:
        self.entered.set()
        self.opened.wait(30)  # the test's own waits fail first
        with self.wrote:
            written = super().write(text)
            self.wrote.notify_all()
        return written

    def wait_for(self, text: str) -> bool:
        with self.wrote:
            return self.wrote.wait_for(lambda: text in self.getvalue(), timeout=10)

    def lines(self) -> list[str]:
        return [line.split(": ", 1)[1] for line in self.getvalue().splitlines()]


@pytest.fixture
def configured() -> Iterator[None]:
    """``logs.configure`` may be called; the root logger is as it was afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        logs.flush(5)
        root.handlers[:], root.level = saved


@pytest.fixture
def stuck(configured: None) -> Iterator[Callable[[], _StuckOutput]]:
    """Stuck outputs, all opened once the test is over (a failed test leaves the one writer
    of the process free for the next)."""
    made: list[_StuckOutput] = []

    def make() -> _StuckOutput:
        made.append(_StuckOutput())
        return made[-1]

    yield make
    for out in made:
        out.opened.set()


def test_token_shaped_text_is_masked_and_bound_ids_are_added(capsys, configured):
    logs.configure(level=logging.INFO, fmt="json")
    with trace.bind(request_id="req-1", actor="U1"):
        logging.getLogger("approval-bot.test").info("token %s refused", "xoxb-1-2-abc")
    assert logs.flush(10)
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
        assert logs.flush(10)
        err = capsys.readouterr().err
        if fmt == "json":
            line = json.loads(err.strip().splitlines()[-1])
            assert line["message"] == "could not store an item"
            assert "ValueError: bad payload" in line["exc_info"]
        else:
            assert "could not store an item" in err
            assert "Traceback" in err and "ValueError: bad payload" in err


def test_configured_again_each_line_goes_where_and_as_it_was_configured_when_logged(
    monkeypatch, configured, stuck
):
    first, second = stuck(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logs.configure(level=logging.INFO, fmt="json")
    logging.getLogger("approval-bot.test").info("before 1")
    assert first.entered.wait(10)  # the writer is busy with the first line
    logging.getLogger("approval-bot.test").info("before 2")
    monkeypatch.setattr(sys, "stderr", second)
    logs.configure(level=logging.INFO, fmt="text")
    logging.getLogger("approval-bot.test").info("after")
    first.opened.set()
    assert logs.flush(10)
    before = [json.loads(line)["message"] for line in first.getvalue().splitlines()]
    assert before == ["before 1", "before 2"]
    assert second.getvalue().endswith("INFO approval-bot.test: after\n")


def test_after_the_exit_flush_lines_are_still_masked_and_formatted(capsys, configured):
    """At exit other threads may still log (an error while the bot drains): their lines are
    written as configured, never raw, and never with a token in clear."""
    logs.configure(level=logging.INFO, fmt="json")
    assert logs.flush(10)
    logging.getLogger("approval-bot.test").error("auth failed for %s", "xoxb-123-456-secret")
    assert logs.flush(10)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert (line["message"], line["level"]) == ("auth failed for xoxb-***", "ERROR")


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


def test_a_log_call_never_waits_for_a_stuck_output(monkeypatch, configured, stuck):
    """A click's thread logs (its audit events, a warning): if the log's output stops taking
    lines, the click still goes on. The lines are written once the output takes them again,
    in order, as they were when logged."""
    out = stuck()
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
    assert logs.flush(10)
    assert out.lines() == ["first", "second", "third", "status ['pending']"]


def test_lines_the_output_could_not_keep_up_with_are_dropped_and_counted_where_lost(
    monkeypatch, configured, stuck
):
    """The queue of lines is bounded: a stuck output costs lines, not the bot's memory, and
    the log says how many were lost, where they were."""
    out = stuck()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO, queue_lines=3)
    first = _log_from_a_thread(["line 0"])
    assert out.entered.wait(10) and first.wait(10)
    rest = _log_from_a_thread([f"line {n}" for n in range(1, 10)])
    assert rest.wait(10), "a log call waited for the output"
    out.opened.set()
    assert out.wait_for("line 2"), "the lines queued were not written"
    logging.getLogger("approval-bot.test").info("line 10")
    assert logs.flush(10)
    lost = "7 log lines were lost here: the log's output did not keep up"
    # three wait at most, the one being written included
    assert out.lines() == ["line 0", "line 1", "line 2", lost, "line 10"]


def test_each_time_lines_are_lost_the_bound_is_the_same(monkeypatch, configured, stuck):
    """A collector that stalls again and again: the notices count as waiting lines too, so
    the bound stays what it was."""
    out = stuck()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO, queue_lines=2)
    for episode in (1, 2):
        out.opened.clear()
        out.entered.clear()
        first = _log_from_a_thread([f"{episode}: a"])
        assert out.entered.wait(10) and first.wait(10)
        assert _log_from_a_thread([f"{episode}: {n}" for n in "bcdef"]).wait(10)
        out.opened.set()
        assert logs.flush(10)
    lost = "log lines were lost here: the log's output did not keep up"
    assert out.lines() == ["1: a", "1: b", f"4 {lost}", "2: a", "2: b", f"4 {lost}"]


def test_the_queue_is_bounded_by_its_text_too(monkeypatch, configured, stuck):
    """A burst of long lines (tracebacks) waits in a few MiB, not in all the memory there is."""
    out = stuck()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO, queue_lines=100, queue_bytes=4000)
    first = _log_from_a_thread(["line 0"])
    assert out.entered.wait(10) and first.wait(10)
    long = "x" * 1500  # about 2,000 bytes waiting each: one fits, the next two do not
    assert _log_from_a_thread([long, long, long]).wait(10)
    out.opened.set()
    assert out.wait_for(long)
    logging.getLogger("approval-bot.test").info("end")
    assert logs.flush(10)
    lost = "2 log lines were lost here: the log's output did not keep up"
    assert out.lines() == ["line 0", long, lost, "end"]


_LOG_A_LOT = """
import logging, sys
from bot import logs
logs.configure(level=logging.INFO)
for n in range(int(sys.argv[1])):
    logging.getLogger("approval-bot.test").info("line %d %s", n, "x" * 200)
print("logged", flush=True)
"""


BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
"""As a process starts by default: its stderr buffered (a container image may set
PYTHONUNBUFFERED; a plain install does not)."""


def _script(tmp_path: Path, text: str) -> str:
    """A file, run as the console script runs the bot (the interpreter flushes its streams
    after a file's code, before the exit handlers)."""
    path = tmp_path / "script.py"
    path.write_text(text)
    return str(path)


def test_every_line_is_written_before_the_process_exits(tmp_path: Path):
    args = [sys.executable, _script(tmp_path, _LOG_A_LOT), "3000"]
    done = subprocess.run(
        args, check=False, capture_output=True, text=True, timeout=60, env=BUFFERED
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 3000 and lines[-1].split(": ", 1)[1].startswith("line 2999 ")


def test_a_process_whose_log_output_is_stuck_still_exits(tmp_path: Path):
    """Its stderr is a pipe nobody reads (a collector that hung): the process still ends,
    after a bounded wait for the lines, and cleanly."""
    proc = subprocess.Popen(
        [sys.executable, _script(tmp_path, _LOG_A_LOT), "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # never read: full after about 64 KiB
        text=True,
        env=BUFFERED,
    )
    try:
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert code == 0
    assert proc.stdout is not None
    assert proc.stdout.read() == "logged\n"


_FORKED = """
import logging, os
from bot import logs
logs.configure(level=logging.INFO)
logging.getLogger("approval-bot.test").info("parent")
child = os.fork()
if child == 0:
    logging.getLogger("approval-bot.test").info("child")
    os._exit(0 if logs.flush(10) else 3)
_, status = os.waitpid(child, 0)
logging.getLogger("approval-bot.test").info("child exited %d", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_writes_its_own_lines(tmp_path: Path):
    args = [sys.executable, _script(tmp_path, _FORKED)]
    done = subprocess.run(
        args, check=False, capture_output=True, text=True, timeout=60, env=BUFFERED
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.split(": ", 1)[1] for line in done.stderr.splitlines()]
    assert lines == ["parent", "child", "child exited 0"]


class _FailingOutput(io.StringIO):
    def write(self, text: str) -> int:
        if "boom" in text:
            raise OSError("the collector went away")
        return super().write(text)


def test_a_line_the_output_failed_is_counted_with_why(monkeypatch, configured):
    out = _FailingOutput()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO)
    for line in ("before", "boom", "after"):
        logging.getLogger("approval-bot.test").info(line)
    assert logs.flush(10)
    logging.getLogger("approval-bot.test").info("later")
    assert logs.flush(10)
    written = [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]
    lost = "1 log lines were lost here: the log's output failed (OSError)"
    assert written == ["before", "after", lost, "later"]


def test_a_bad_log_call_costs_its_line_not_the_caller(monkeypatch, configured):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure(level=logging.INFO)
    logging.getLogger("approval-bot.test").info("%s and %s", "only one")  # noqa: PLE1206
    logging.getLogger("approval-bot.test").info("next")
    assert logs.flush(10)
    written = [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]
    lost = "1 log lines were lost here: a log call's arguments did not fit its message"
    assert written == [lost, "next"]


_CRASH = """
import logging
import os
import signal
from agent_runtime.faults import fault_point
from bot import logs
logs.configure(level=logging.INFO)
for n in range(200):
    logging.getLogger("approval-bot.test").info("line %d", n)
fault_point("after_ack")
"""


def test_the_lines_logged_before_a_crash_test_kill_are_in_the_log():
    """A crash test reads the log to see where the process stopped."""
    env = {**BUFFERED, "APPROVAL_BOT_FAULT": "after_ack"}
    args = [sys.executable, "-c", _CRASH]
    done = subprocess.run(args, check=False, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == -signal.SIGKILL
    assert done.stderr.splitlines()[-1].endswith("line 199")
