"""HTTP mode: POST /slack/events to Bolt; GET /healthz and GET /metrics for operators."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from slack_bolt.adapter.wsgi import SlackRequestHandler
from sqlalchemy import text
from waitress.server import TcpWSGIServer, create_server

from bot.app import Bot

logger = logging.getLogger(__name__)
MAX_BODY = 1024 * 1024


class Frontend:
    """A small WSGI router in front of Bolt's WSGI handler."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.slack = SlackRequestHandler(bot.app, path="/slack/events")

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path == "/slack/events" and method == "POST":
            self.bot.services.metrics.inc("http_requests")
            return self._slack(environ, start_response)
        if path == "/healthz" and method == "GET":
            return self._health(start_response)
        if path == "/metrics" and method == "GET":
            gauges = {"worker_tasks_in_flight": float(self.bot.services.executor.in_flight)}
            body = self.bot.services.metrics.render(gauges)
            return _reply(start_response, "200 OK", body, "text/plain; version=0.0.4")
        return _reply(start_response, "404 Not Found", "not found\n")

    def _slack(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """Bolt parses the body after checking the signature; a signed body it cannot parse
        (not an object, no payload, wrong types) is the sender's error, not ours: 400."""
        try:
            return self.slack(environ, start_response)
        except Exception:
            logger.warning("malformed Slack request refused", exc_info=True)
            self.bot.services.metrics.inc("malformed_requests")
            return _reply(start_response, "400 Bad Request", "malformed request\n")

    def _health(self, start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            with self.bot.db.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception:
            logger.exception("health check: database unreachable")
            return _reply(start_response, "503 Service Unavailable", "database unreachable\n")
        return _reply(start_response, "200 OK", "ok\n")


def _reply(
    start_response: Callable[..., Any], status: str, body: str, content_type: str = "text/plain"
) -> Iterable[bytes]:
    data = body.encode("utf-8")
    start_response(
        status,
        [("Content-Type", f"{content_type}; charset=utf-8"), ("Content-Length", str(len(data)))],
    )
    return [data]


class HttpServer:
    """waitress in a thread of its own, stopped from any thread without tearing its loop."""

    def __init__(self, bot: Bot, *, host: str, port: int, threads: int) -> None:
        server = create_server(
            Frontend(bot),
            host=host,
            port=port,
            threads=threads,
            max_request_body_size=MAX_BODY,
            ident="approval-bot",
        )
        if not isinstance(server, TcpWSGIServer):  # one host and port: always a TCP server
            raise TypeError(f"unexpected waitress server {type(server).__name__}")
        # Any: types-waitress does not declare effective_port, the channel map or the trigger.
        self._server: Any = server
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.effective_port)

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Close every channel from inside the loop; the loop ends when none is left."""
        channels = self._server._map

        def close_all() -> None:
            for channel in list(channels.values()):
                channel.close()

        self._server.trigger.pull_trigger(close_all)
        self._thread.join(timeout)
        self._server.task_dispatcher.shutdown(timeout=int(timeout))


def make_server(
    bot: Bot, *, host: str = "0.0.0.0", port: int = 3000, threads: int = 32
) -> HttpServer:
    """Port 0 picks a free port; ``.port`` tells which."""
    return HttpServer(bot, host=host, port=port, threads=threads)
