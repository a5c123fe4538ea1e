"""Logging for operators: plain text, or one JSON object per line (``LOG_FORMAT=json``)
carrying the ids of the run, approval, action and actor it concerns; tokens never printed.

A thread that logs (a click's worker, the ack path) only queues the record; one thread of the
process writes the lines, in order. A slow or stuck output (a full pipe to a log collector)
then never holds up a click. The queue is bounded: lines it has no room for are dropped, and a
line says how many where they were lost. At exit, what waits is written first (a few seconds
at most: a stuck output does not keep the process from ending)."""

from __future__ import annotations

import atexit
import copy
import logging
import os
import queue
import re
import sys
import threading
from dataclasses import dataclass
from typing import TextIO

from pythonjsonlogger.json import JsonFormatter

from agent_runtime import trace

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SECRET = re.compile(r"\b(xox[abposre]|xapp)-[A-Za-z0-9-]+")
QUEUE_LINES = 10_000
"""Lines waiting for the output at most; beyond, new ones are dropped."""
QUEUE_BYTES = 16 * 1024 * 1024
"""Text of the waiting lines at most (characters of messages and tracebacks, and 512 more
for each line)."""
STOP_SECONDS = 5.0
FLUSH_SECONDS = 1.0


class TraceFilter(logging.Filter):
    """Puts the bound ids on each record, merges its message with its arguments (once, and
    now: they may change once the caller goes on), and masks anything shaped like a Slack
    token. Runs on the thread that logs: the ids are bound to its context."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in trace.current().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        message = record.getMessage()
        if SECRET.search(message):
            record.msg, record.args = SECRET.sub(r"\1-***", message), None
        elif record.args:
            record.msg, record.args = message, None
        return True


class TextFormatter(logging.Formatter):
    """The text line ends with the bound ids, so a grep for an approval's id finds its lines."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(
            f"{key}={getattr(record, key)}" for key in trace.FIELDS if hasattr(record, key)
        )
        return f"{line} [{ids}]" if ids else line


class _Output:
    """A stream and its format; written by the writer thread only. A stream on a file
    descriptor is written through a descriptor of our own: a writer blocked on a full pipe
    then holds no lock of the stream's buffer, which the interpreter takes to flush it as the
    process exits (with a buffered stderr it would wait for the writer forever)."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        self.stream = stream
        self.formatter = formatter
        self.fd = _own_descriptor(stream)
        self.encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, record: logging.LogRecord) -> None:
        text = self.formatter.format(record) + "\n"
        if self.fd is None:
            self.stream.write(text)
            self.stream.flush()
            return
        data = memoryview(text.encode(self.encoding, "backslashreplace"))
        while data:
            data = data[os.write(self.fd, data) :]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def _own_descriptor(stream: TextIO) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    stream.flush()  # what it holds goes out before our lines
    return os.dup(fd)


@dataclass(frozen=True)
class _Switch:
    output: _Output  # lines after this one go there (a new configuration)


_Item = tuple[logging.LogRecord, int] | _Switch | threading.Event
"""A line and its size, a new output, or a marker set once the lines before it are written."""


def _size(record: logging.LogRecord) -> int:
    """Roughly what a waiting record holds: its text, and the rest of it."""
    text = (str(record.msg), record.exc_text or "", record.stack_info or "")
    return sum(len(part) for part in text) + 512


def _notice(lost: int, *, why: list[str]) -> logging.LogRecord:
    return logging.makeLogRecord(
        {
            "name": "approval-bot.logs",
            "levelno": logging.WARNING,
            "levelname": "WARNING",
            "msg": f"{lost} log lines were lost here: {'; '.join(why)}",
        }
    )


def _prepared(record: logging.LogRecord) -> logging.LogRecord:
    """The record as it is now: its traceback as text (its message is merged already, by
    ``TraceFilter``); its other attributes (the bound ids, the level, the time) kept. A dict
    message stays a dict (JSON fields)."""
    prepared = copy.copy(record)
    if not isinstance(record.msg, str | dict):  # an object: as it reads now
        prepared.msg = str(record.msg)
    if record.exc_info:
        prepared.exc_text = record.exc_text or _PLAIN.formatException(record.exc_info)
    prepared.exc_info = None
    return prepared


_PLAIN = logging.Formatter()


class _Lines(logging.Handler):
    """The root logger's one handler: queues each record for the writer thread. It takes no
    lock of logging's (logging's shutdown takes them all), no caller ever writes, and the
    writer takes no lock of the callers' (a signal handler that logs or flushes, in a thread
    that held one, would otherwise wait for a writer waiting for it)."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(TraceFilter())
        self.max_lines, self.max_bytes = QUEUE_LINES, QUEUE_BYTES
        self.output: _Output | None = None  # where the lines queued last go; None: not started
        self._reset()

    def _reset(self) -> None:
        self.turn = threading.RLock()  # queue order and the callers' counts; for signals too
        self.queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self.queued = [0, 0]  # lines and size queued, by the callers (under ``turn``)
        self.done = [0, 0]  # lines and size written or failed, by the writer alone
        self.full = self.unfit = 0  # lines lost since the last notice, by the callers
        self.failed, self.failed_told = 0, 0  # lines the output failed, by the writer
        self.failure = "the log's output failed"  # and why, last, by the writer

    def handle(self, record: logging.LogRecord) -> bool:
        try:
            kept = self.filter(record)  # may format the message: arguments may not fit
            if isinstance(kept, logging.LogRecord):
                record = kept
            if kept:
                self.emit(record)
            return bool(kept)
        except Exception:  # that line is lost, and counted; never the caller's problem
            with self.turn:
                self.unfit += 1
            return False

    def emit(self, record: logging.LogRecord) -> None:
        prepared = _prepared(record)
        size = _size(prepared)
        with self.turn:
            done = self.done  # replaced whole by the writer: one consistent pair
            lines, chars = self.queued[0] - done[0], self.queued[1] - done[1]
            if lines >= self.max_lines or chars + size > self.max_bytes:
                self.full += 1
                return
            self._tell_lost()
            self._put((prepared, size), size)

    def _put(self, item: _Item, size: int) -> None:
        self.queued = [self.queued[0] + 1, self.queued[1] + size]
        self.queue.put_nowait(item)

    def _tell_lost(self) -> None:
        """Queue a line saying how many were lost since the last such line, and why, if any."""
        failed, told = self.failed, self.failed_told
        why = [
            reason
            for count, reason in (
                (self.full, "the log's output did not keep up"),
                (failed - told, self.failure),
                (self.unfit, "a log call's arguments did not fit its message"),
            )
            if count
        ]
        lost = self.full + failed - told + self.unfit
        self.full = self.unfit = 0
        self.failed_told = failed
        if lost:
            self._put((_notice(lost, why=why), 0), 0)

    def _write(self, lines: queue.SimpleQueue[_Item], output: _Output) -> None:
        while True:
            item = lines.get()
            if isinstance(item, _Switch):
                output.close()
                output = item.output
            elif isinstance(item, threading.Event):
                item.set()
            else:
                record, size = item
                try:
                    output.write(record)
                except Exception as exc:  # the output failed: the line is lost, and counted
                    self.failure = f"the log's output failed ({type(exc).__name__})"
                    self.failed += 1
                self.done = [self.done[0] + 1, self.done[1] + size]

    def _start(self) -> None:
        assert self.output is not None
        writer = threading.Thread(
            target=self._write, args=(self.queue, self.output), name="log-writer", daemon=True
        )
        writer.start()

    def configure(self, output: _Output, *, max_lines: int, max_bytes: int) -> None:
        with self.turn:  # each line goes to one output, in order
            self.max_lines, self.max_bytes = max_lines, max_bytes
            started, self.output = self.output is not None, output
            if started:
                self.queue.put_nowait(_Switch(output))
            else:
                self._start()

    def flush(self) -> None:
        """What logging's shutdown, and a process about to be killed, call."""
        self.written(FLUSH_SECONDS)

    def written(self, timeout: float) -> bool:
        """Wait (``timeout`` at most) until every line queued so far is written."""
        with self.turn:
            if self.output is None:
                return True
            self._tell_lost()
            marker = threading.Event()
            self.queue.put_nowait(marker)
        return marker.wait(timeout)

    def after_fork(self) -> None:
        """A forked child has no writer thread: it starts its own, for its own lines."""
        self._reset()
        if self.output is not None:
            self._start()


_LINES = _Lines()
os.register_at_fork(after_in_child=_LINES.after_fork)


def configure(
    *,
    level: int,
    fmt: str = "text",
    queue_lines: int = QUEUE_LINES,
    queue_bytes: int = QUEUE_BYTES,
) -> None:
    """Log at ``level`` to stderr, as ``fmt`` says. Called again, lines logged before go to
    the earlier output, those after to the new one, in order."""
    formatter: logging.Formatter
    if fmt == "json":
        formatter = JsonFormatter(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp=True,
        )
    else:
        formatter = TextFormatter(TEXT_FORMAT)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old is not _LINES:
            root.removeHandler(old)
    _LINES.configure(_Output(sys.stderr, formatter), max_lines=queue_lines, max_bytes=queue_bytes)
    root.addHandler(_LINES)  # once: the same handler is never added twice
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def flush(timeout: float = FLUSH_SECONDS) -> bool:
    """Wait (``timeout`` at most) until every line logged so far is written; False if the
    output did not take them in time."""
    return _LINES.written(timeout)


atexit.register(flush, STOP_SECONDS)  # at exit: what waits is written, or given up on
