"""What operators and orchestrators read: ``/metrics``, ``/healthz`` and ``/readyz``.

Served on the admin port in every mode (Socket Mode has no HTTP port of its own, and a
container's health check needs one), and on the main port in HTTP mode too.

- ``/healthz``: the process answers and its store answers (restart it if not);
- ``/readyz``: healthy, and not draining (a stopping process takes no new work).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from bot.metrics import CONTENT_TYPE, Metrics

logger = logging.getLogger(__name__)
StartResponse = Callable[..., Any]


class Watched(Protocol):
    """What the admin endpoints read of a bot."""

    @property
    def metrics(self) -> Metrics: ...

    def store_answers(self) -> bool: ...

    def draining(self) -> bool: ...


class AdminApp:
    """A WSGI app; ``route`` answers one of its paths, or ``None`` for a path it does not own
    (so the main port's router can put it in front of Bolt)."""

    PATHS = ("/metrics", "/healthz", "/readyz")

    def __init__(self, bot: Watched) -> None:
        self.bot = bot

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        answer = self.route(environ, start_response)
        if answer is None:
            return reply(start_response, "404 Not Found", b"not found\n")
        return answer

    def route(
        self, environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes] | None:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path not in self.PATHS:
            return None
        if method != "GET":
            return reply(start_response, "405 Method Not Allowed", b"GET only\n")
        if path == "/metrics":
            return reply(start_response, "200 OK", self.bot.metrics.render(), CONTENT_TYPE)
        if not self.bot.store_answers():
            return reply(start_response, "503 Service Unavailable", b"database unreachable\n")
        if path == "/readyz" and self.bot.draining():
            return reply(start_response, "503 Service Unavailable", b"draining\n")
        return reply(start_response, "200 OK", b"ok\n")


def reply(
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
) -> Iterable[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
