"""What the store's connections really send PostgreSQL and hear back, from libpq's own trace
of the wire protocol: round trips and transaction states as the server reported them."""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

import psycopg
from sqlalchemy import event

from store.db import Database

_MESSAGE = re.compile(r"^([FB])\t\d+\t(\w+)\t?(.*)$")


@dataclass
class Wire:
    """The messages of every pooled connection checked out while it was watching: one block
    per checkout, in order within it, the blocks in the order the connections came back."""

    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (F|B, type, text)

    @property
    def round_trips(self) -> int:
        """Each answer the client waits for ends with the server's ReadyForQuery."""
        return sum(1 for _side, kind, _text in self.messages if kind == "ReadyForQuery")

    def state_after(self, *markers: str) -> str:
        """The transaction state the server reported once the first statement containing all
        ``markers`` was done: ``I`` if it ran as its own transaction (committed already), ``T``
        if inside an open one."""
        sent = next(
            i
            for i, (side, _kind, text) in enumerate(self.messages)
            if side == "F" and all(marker in text for marker in markers)
        )
        return next(
            text.strip()
            for side, kind, text in self.messages[sent:]
            if side == "B" and kind == "ReadyForQuery"
        )


def _parsed(lines: Iterator[str]) -> list[tuple[str, str, str]]:
    messages: list[tuple[str, str, str]] = []
    for line in lines:
        found = _MESSAGE.match(line.rstrip("\n"))
        if found:
            messages.append((found[1], found[2], found[3]))
        elif messages:  # a statement's text goes on over several lines
            side, kind, text = messages[-1]
            messages[-1] = (side, kind, f"{text} {line.strip()}")
    return messages


@contextmanager
def watching(db: Database) -> Iterator[Wire]:
    """Trace connections as the pool hands them out, each checkout to a file of its own (libpq
    buffers a trace: several connections writing to one file would interleave), its messages
    added to the wire as one block when the connection comes back."""
    wire = Wire()
    flags = psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
    open_traces: dict[int, tuple[Any, IO[str]]] = {}
    lock = threading.Lock()

    def trace(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        sink = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed when collected
        dbapi_conn.pgconn.trace(sink.fileno())
        dbapi_conn.pgconn.set_trace_flags(flags)
        with lock:
            open_traces[id(dbapi_conn)] = (dbapi_conn, sink)

    def untrace(dbapi_conn: Any, _record: Any) -> None:
        with lock:
            traced = open_traces.pop(id(dbapi_conn), None)
        if traced is not None:
            collect(*traced)

    def collect(dbapi_conn: Any, sink: IO[str]) -> None:
        dbapi_conn.pgconn.untrace()  # flushes what libpq buffered
        sink.seek(0)
        block = _parsed(iter(sink))
        sink.close()
        with lock:
            wire.messages.extend(block)

    event.listen(db.engine.pool, "checkout", trace)
    event.listen(db.engine.pool, "checkin", untrace)
    try:
        yield wire
    finally:
        event.remove(db.engine.pool, "checkout", trace)
        event.remove(db.engine.pool, "checkin", untrace)
        with lock:
            still_out = list(open_traces.values())
            open_traces.clear()
        for traced in still_out:
            collect(*traced)
