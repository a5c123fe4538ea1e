"""Logging for operators: plain text, or one JSON object per line (``LOG_FORMAT=json``)
carrying the ids of the run, approval, action and actor it concerns; tokens never printed."""

from __future__ import annotations

import logging
import re
import sys

from pythonjsonlogger.json import JsonFormatter

from agent_runtime import trace

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SECRET = re.compile(r"\b(xox[abposre]|xapp)-[A-Za-z0-9-]+")


class TraceFilter(logging.Filter):
    """Puts the bound ids on each record, and masks anything shaped like a Slack token."""

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


def configure(*, level: int, fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(TraceFilter())
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
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
