"""HTTP mode: POST /slack/events (and, installing by OAuth, GET /slack/install and
/slack/oauth_redirect) to Bolt, and the admin endpoints (``bot.admin``) beside it;
the same waitress server serves the admin port on its own in every mode."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.adapter.wsgi.http_request import WsgiHttpRequest
from slack_sdk.signature import SignatureVerifier
from waitress.server import TcpWSGIServer, create_server

from bot.ack_first import AckFirst
from bot.admin import AdminApp
from bot.app import Bot
from bot.listeners.payloads import MalformedPayload, parse_payload
from bot.settings import ConfigError

logger = logging.getLogger(__name__)
MAX_BODY = 1024 * 1024


class Frontend:
    """A small WSGI router in front of Bolt's WSGI handler."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        secret = bot.settings.slack_signing_secret
        verifier = SignatureVerifier(secret.get_secret_value() if secret else "")
        self.slack = _CheckedHandler(bot.app, verifier=verifier, turns=bot.services.ack_first)
        self.admin = AdminApp(bot)
        flow = bot.app.oauth_flow
        self.oauth_paths = (flow.install_path, flow.redirect_uri_path) if flow else ()
        """Installing by OAuth: the install link and Slack's redirect back, both GET."""

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path == "/slack/events" and method == "POST":
            self.bot.services.metrics.inc("http_requests")
            with self.bot.services.metrics.ack_timer("http"):
                return self._slack(environ, start_response)
        if method == "GET" and path in self.oauth_paths:
            return self.slack(environ, start_response)  # Bolt's install flow
        answer = self.admin.route(environ, start_response)
        if answer is not None:
            return answer
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
            return self._refuse(start_response)

    def _refuse(self, start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.bot.services.metrics.inc("malformed_requests")
        return _reply(start_response, "400 Bad Request", "malformed request\n")


class _CheckedHandler(SlackRequestHandler):
    """Bolt's WSGI handler, refusing a signed body whose shape Bolt's own middleware would trip
    over (e.g. an event that is not an object) before Bolt's middleware sees it. The body is
    parsed once, for both. A signed request is counted as being answered (``AckFirst``) while
    Bolt serves it: an unsigned one must not hold the inbox workers back. Bolt checks the
    signature again (an HMAC of the body: microseconds)."""

    def __init__(self, app: App, *, verifier: SignatureVerifier, turns: AckFirst) -> None:
        super().__init__(app, path="/slack/events")
        self.verifier = verifier
        self.turns = turns

    def dispatch(self, request: WsgiHttpRequest) -> BoltResponse:
        bolt_request = BoltRequest(
            body=request.get_body(), query=request.query_string, headers=request.get_headers()
        )
        signed = self._signed(bolt_request)
        try:
            parse_payload(bolt_request.body)
        except (MalformedPayload, ValueError):
            if signed:
                raise  # the sender's error: 400 (unsigned, Bolt answers 401)
        if not signed:
            return self.app.dispatch(bolt_request)  # Bolt answers 401
        with self.turns.answering():
            return self.app.dispatch(bolt_request)

    def _signed(self, bolt_request: BoltRequest) -> bool:
        names = ("x-slack-request-timestamp", "x-slack-signature")
        headers = {name: (bolt_request.headers.get(name) or [""])[0] for name in names}
        return self.verifier.is_valid_request(bolt_request.raw_body, headers)


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
    """A WSGI app on waitress in a thread of its own, stopped from any thread without tearing
    its loop."""

    def __init__(self, app: Callable[..., Any], *, host: str, port: int, threads: int) -> None:
        server = create_server(
            app,
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

        try:
            self._server.trigger.pull_trigger(close_all)
        except OSError:  # the loop already closed its channels (and the trigger with them)
            logger.debug("HTTP server already stopped")
        self._thread.join(timeout)
        self._server.task_dispatcher.shutdown(timeout=int(timeout))


def make_server(
    bot: Bot, *, host: str = "0.0.0.0", port: int = 3000, threads: int = 32
) -> HttpServer:
    """Port 0 picks a free port; ``.port`` tells which."""
    return HttpServer(Frontend(bot), host=host, port=port, threads=threads)


def make_admin_server(bot: Bot, *, host: str = "0.0.0.0", port: int = 9100) -> HttpServer:
    """The admin endpoints alone (a few threads: scrapes and probes, not Slack's traffic)."""
    return HttpServer(AdminApp(bot), host=host, port=port, threads=4)


def start_admin_server(bot: Bot) -> HttpServer:
    """Metrics and health on the admin port, whatever the mode; up until the bot has closed,
    so a probe sees the drain (``/readyz`` 503) rather than a refused connection. A port in
    use is one line at start-up (the bot built so far is closed first)."""
    settings = bot.settings
    try:
        server = make_admin_server(bot, host=settings.admin_host, port=settings.admin_port)
    except OSError as exc:
        bot.close(drain_seconds=0)
        raise ConfigError(
            f"ADMIN_PORT: cannot listen on {settings.admin_host}:{settings.admin_port} "
            f"({exc.strerror or exc})"
        ) from None
    server.start()
    logger.info(
        "admin endpoints on %s:%s (/metrics, /healthz, /readyz)", settings.admin_host, server.port
    )
    return server
