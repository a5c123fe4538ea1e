"""Logging for operators: plain text, or one JSON object per line (``LOG_FORMAT=json``)
carrying the ids of the run, approval, action and actor it concerns; tokens never printed.

A thread that logs (a click's worker, the ack path) only queues the record; a thread of its
own formats and writes the lines, in order. A slow or stuck output (a full pipe to a log
collector) then never holds up a click. The queue is bounded: lines it has no room for are
dropped, and a line says how many where they were lost. A stop (at exit, before a process is
ended at once) writes what waits first, for a few seconds at most; lines logged after it are
written at once, as before, or, if the output was stuck, counted and dropped."""

from __future__ import annotations

import atexit
import copy
import enum
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
"""Text of the waiting lines (messages and tracebacks) at most."""
STOP_SECONDS = 5.0
FLUSH_SECONDS = 1.0


class TraceFilter(logging.Filter):
    """Puts the bound ids on each record, and masks anything shaped like a Slack token. Runs
    on the thread that logs: the ids are bound to its context."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in trace.current().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        message = record.getMessage()
        if SECRET.search(message):
            record.msg, record.args = SECRET.sub(r"\1-***", message), None
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
    """A stream and its format. Written under a lock of its own, not a logging handler's:
    logging's shutdown takes every handler's lock, and must not wait for a stuck stream."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        self.stream = stream
        self.formatter = formatter
        self.lock = threading.Lock()

    def write(self, record: logging.LogRecord) -> None:
        text = self.formatter.format(record) + "\n"
        with self.lock:
            self.stream.write(text)
            self.stream.flush()


class _Mode(enum.Enum):
    QUEUED = "queued"  # the writer thread writes
    DIRECT = "direct"  # stopped with nothing left waiting: the caller writes, as before
    DISCARD = "discard"  # stopped on a stuck output: lines are counted and dropped


@dataclass(frozen=True)
class _Switch:
    output: _Output  # lines after this one go there (a new configuration)


_Item = tuple[logging.LogRecord, int] | _Switch | threading.Event | None


def _size(record: logging.LogRecord) -> int:
    return len(str(record.msg)) + len(record.exc_text or "") + 512  # 512: the rest, roughly


def _notice(dropped: int) -> logging.LogRecord:
    return logging.makeLogRecord(
        {
            "name": "approval-bot.logs",
            "levelno": logging.WARNING,
            "levelname": "WARNING",
            "msg": f"{dropped} log lines were dropped here: the log's output did not keep up",
        }
    )


def _prepared(record: logging.LogRecord) -> logging.LogRecord:
    """The record as it is now: its message merged with its arguments (they may change once
    the caller goes on), its traceback as text; its other attributes (the bound ids, the
    level, the time) kept. A dict message with no arguments stays a dict (JSON fields)."""
    prepared = copy.copy(record)
    if record.args or not isinstance(record.msg, dict):
        prepared.msg, prepared.args = record.getMessage(), None
    if record.exc_info:
        prepared.exc_text = record.exc_text or _PLAIN.formatException(record.exc_info)
    prepared.exc_info = None
    return prepared


_PLAIN = logging.Formatter()


class _Lines(logging.Handler):
    """The root logger's one handler: queues each record for the writer thread. It takes no
    lock of logging's while it writes (logging's shutdown takes them all)."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(TraceFilter())
        self.max_lines, self.max_bytes = QUEUE_LINES, QUEUE_BYTES
        self.queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()  # never blocks a put
        self.turn = threading.RLock()  # mode, counts and queue order; re-entrant: signals
        self.waiting = self.waiting_bytes = 0
        self.dropped = self.told = 0
        self.mode = _Mode.DIRECT
        self.output: _Output | None = None

    def handle(self, record: logging.LogRecord) -> bool:
        kept = self.filter(record)
        if isinstance(kept, logging.LogRecord):
            record = kept
        if kept:
            self.emit(record)
        return bool(kept)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            prepared = _prepared(record)
            with self.turn:
                output = self.output if self.mode is _Mode.DIRECT else None
                if self.mode is _Mode.QUEUED:
                    self._queue(prepared)
                elif output is None:
                    self.dropped += 1
            if output is not None:
                output.write(prepared)
        except Exception:  # a line that cannot be written costs that line, never the caller
            self._drop()

    def _drop(self) -> None:
        with self.turn:
            self.dropped += 1

    def _queue(self, record: logging.LogRecord) -> None:
        size = _size(record)
        if self.waiting >= self.max_lines or self.waiting_bytes + size > self.max_bytes:
            self.dropped += 1
            return
        self.waiting, self.waiting_bytes = self.waiting + 1, self.waiting_bytes + size
        self._tell_dropped()
        self.queue.put_nowait((record, size))

    def _tell_dropped(self) -> None:
        """Queue a line saying how many were dropped since the last such line, if any."""
        if self.dropped > self.told:
            self.queue.put_nowait((_notice(self.dropped - self.told), 0))
            self.told = self.dropped

    def _write(self, lines: queue.SimpleQueue[_Item]) -> None:
        output = self.output
        while (item := lines.get()) is not None:
            if isinstance(item, _Switch):
                output = item.output
            elif isinstance(item, threading.Event):
                item.set()
            else:
                record, size = item
                with self.turn:
                    self.waiting, self.waiting_bytes = self.waiting - 1, self.waiting_bytes - size
                try:
                    assert output is not None  # set before the writer starts
                    output.write(record)
                except Exception:  # the output failed: the line is lost, and counted
                    self._drop()

    def configure(self, output: _Output, *, max_lines: int) -> None:
        with self.turn:  # each line goes to one output, in order
            self.max_lines = max_lines
            if self.mode is _Mode.QUEUED:
                self.queue.put_nowait(_Switch(output))
                self.output = output
                return
            self.queue, self.output, self.mode = queue.SimpleQueue(), output, _Mode.QUEUED
            self.waiting = self.waiting_bytes = 0
            writer = threading.Thread(
                target=self._write, args=(self.queue,), name="log-writer", daemon=True
            )
            writer.start()

    def flush(self) -> None:
        """Every line queued so far written (``FLUSH_SECONDS`` at most): what logging's
        shutdown, and a process about to be killed, call."""
        self.written(FLUSH_SECONDS)

    def written(self, timeout: float) -> bool:
        """Wait (``timeout`` at most) until every line queued so far is written."""
        with self.turn:
            if self.mode is not _Mode.QUEUED:
                return True
            self._tell_dropped()
            written = threading.Event()
            self.queue.put_nowait(written)
        return written.wait(timeout)

    def stop(self, timeout: float) -> None:
        flushed = self.written(timeout)
        with self.turn:
            if self.mode is not _Mode.QUEUED:
                return
            self.mode = _Mode.DIRECT if flushed else _Mode.DISCARD
            self.queue.put_nowait(None)

    def after_fork(self) -> None:
        """A forked child has no writer thread: it writes its lines itself."""
        self.turn = threading.RLock()
        if self.mode is _Mode.QUEUED:
            self.mode = _Mode.DIRECT


_LINES = _Lines()
os.register_at_fork(after_in_child=_LINES.after_fork)


def configure(*, level: int, fmt: str = "text", queue_lines: int = QUEUE_LINES) -> None:
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
    _LINES.configure(_Output(sys.stderr, formatter), max_lines=queue_lines)
    root.addHandler(_LINES)  # once: the same handler is never added twice
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def flush(timeout: float = FLUSH_SECONDS) -> bool:
    """Wait (``timeout`` at most) until every line logged so far is written; False if the
    output did not take them in time."""
    return _LINES.written(timeout)


def stop(timeout: float = STOP_SECONDS) -> None:
    """Write what waits (``timeout`` at most), then have each line written as it is logged
    (dropped and counted instead, if the output did not take what waited). At exit, and
    before a process is ended at once."""
    _LINES.stop(timeout)


atexit.register(stop)
