"""Logging for operators: plain text, or one JSON object per line (``LOG_FORMAT=json``)
carrying the ids of the run, approval, action and actor it concerns; tokens never printed.

A thread that logs (a click's worker, the ack path) only queues the record: one thread of
its own formats and writes the lines. A slow or stuck output (a full pipe to a log collector)
then never holds up a click, and formatting costs the click's path nothing. The queue is
bounded: lines it has no room for are dropped, and the log says how many."""

from __future__ import annotations

import atexit
import copy
import logging
import queue
import re
import sys
import threading
from logging.handlers import QueueHandler

from pythonjsonlogger.json import JsonFormatter

from agent_runtime import trace

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SECRET = re.compile(r"\b(xox[abposre]|xapp)-[A-Za-z0-9-]+")
QUEUE_SIZE = 10_000
"""Records waiting for the output at most (a few MiB): beyond, new ones are dropped."""
STOP_SECONDS = 5.0
"""How long a stop waits for the queued lines to be written."""


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


class _Queued(QueueHandler):
    """Queues a record without waiting; counts those the bounded queue had no room for."""

    def __init__(self, records: queue.SimpleQueue[logging.LogRecord | None], *, size: int) -> None:
        super().__init__(records)
        self.records = records
        self.size = size
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        # SimpleQueue: safe in a signal handler, never blocks. qsize is approximate, which a
        # bound on memory does not mind.
        if self.records.qsize() >= self.size:
            self.dropped += 1  # a lost increment under a race loses a count, never a line
            return
        self.records.put_nowait(record)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record as the output's formatter wants it: its message merged with its
        arguments now (they may change once the caller goes on), its traceback as text; its
        other attributes (the bound ids, the level, the time) kept."""
        prepared = copy.copy(record)
        prepared.msg, prepared.args = record.getMessage(), None
        if record.exc_info:
            prepared.exc_text = record.exc_text or _PLAIN.formatException(record.exc_info)
        prepared.exc_info = None
        return prepared


_PLAIN = logging.Formatter()


class _Writer:
    """The thread that formats and writes the queued records; before the next line after some
    were dropped, it says how many."""

    def __init__(
        self,
        records: queue.SimpleQueue[logging.LogRecord | None],
        *,
        queued: _Queued,
        output: logging.Handler,
    ) -> None:
        self.records = records
        self.queued = queued
        self.output = output
        self.told = 0
        self.thread = threading.Thread(target=self._write, name="log-writer", daemon=True)

    def _write(self) -> None:
        while (record := self.records.get()) is not None:
            self.tell_dropped()
            self.output.handle(record)

    def tell_dropped(self) -> None:
        dropped = self.queued.dropped
        if dropped > self.told:
            notice = logging.makeLogRecord(
                {
                    "name": "approval-bot.logs",
                    "levelno": logging.WARNING,
                    "levelname": "WARNING",
                    "msg": f"{dropped - self.told} log lines were dropped: the log's output "
                    "did not keep up",
                }
            )
            self.told = dropped
            self.output.handle(notice)

    def stop(self, timeout: float) -> None:
        """Write what was queued before (waiting ``timeout`` at most for a stuck output)."""
        self.records.put_nowait(None)
        self.thread.join(timeout)
        if not self.thread.is_alive():  # else the output is stuck: a daemon thread, left
            self.tell_dropped()


class _Setup:
    """The writer of the current configuration, if any."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writer: _Writer | None = None

    def replace(self, writer: _Writer | None) -> _Writer | None:
        with self.lock:
            old, self.writer = self.writer, writer
        return old


_SETUP = _Setup()


class TextFormatter(logging.Formatter):
    """The text line ends with the bound ids, so a grep for an approval's id finds its lines."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(
            f"{key}={getattr(record, key)}" for key in trace.FIELDS if hasattr(record, key)
        )
        return f"{line} [{ids}]" if ids else line


def configure(*, level: int, fmt: str = "text", queue_size: int = QUEUE_SIZE) -> None:
    """Log at ``level`` to stderr, as ``fmt`` says, through the queue (replacing any earlier
    configuration, whose queued lines are written first)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp=True,
            )
        )
    else:
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    records: queue.SimpleQueue[logging.LogRecord | None] = queue.SimpleQueue()
    queued = _Queued(records, size=queue_size)
    queued.addFilter(TraceFilter())
    writer = _Writer(records, queued=queued, output=handler)
    stop()
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    writer.thread.start()
    _SETUP.replace(writer)
    root.addHandler(queued)
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def stop(timeout: float = STOP_SECONDS) -> None:
    """Write what is queued, then stop the writer (lines logged after go nowhere until the
    next ``configure``). Called at exit, and before a process ends at once."""
    writer = _SETUP.replace(None)
    if writer is not None:
        logging.getLogger().removeHandler(writer.queued)
        writer.stop(timeout)


atexit.register(stop)
