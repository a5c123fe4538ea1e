"""What the store's connections really send PostgreSQL and hear back, from libpq's own trace
of the wire protocol: round trips and transaction states as the server reported them."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from sqlalchemy import event

from store.db import Database

_MESSAGE = re.compile(r"^([FB])\t\d+\t(\w+)\t?(.*)$")


@dataclass
class Wire:
    """The messages of every pooled connection checked out while it was watching. Each
    connection's are in order; two used at once may interleave (libpq buffers each trace), so
    assertions here are about work done on one connection at a time."""

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


@contextmanager
def watching(db: Database) -> Iterator[Wire]:
    """Trace connections as the pool hands them out; the trace is read when the block ends."""
    wire = Wire()
    with tempfile.TemporaryFile("w+") as sink:
        flags = psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE

        def trace(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
            dbapi_conn.pgconn.trace(sink.fileno())
            dbapi_conn.pgconn.set_trace_flags(flags)

        def untrace(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.pgconn.untrace()

        event.listen(db.engine.pool, "checkout", trace)
        event.listen(db.engine.pool, "checkin", untrace)
        try:
            yield wire
        finally:
            event.remove(db.engine.pool, "checkout", trace)
            event.remove(db.engine.pool, "checkin", untrace)
            sink.flush()
            sink.seek(0)
            for line in sink:
                found = _MESSAGE.match(line.rstrip("\n"))
                if found:
                    wire.messages.append((found[1], found[2], found[3]))
                elif wire.messages:  # a statement's text goes on over several lines
                    side, kind, text = wire.messages[-1]
                    wire.messages[-1] = (side, kind, f"{text} {line.strip()}")
