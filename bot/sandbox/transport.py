"""The sandbox's HTTP transport: requests parsed as Slack's Web API takes them (bearer token or
``token`` argument, form or JSON bodies, basic auth for ``oauth.v2.access``), answers as JSON."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from bot.sandbox.installs import basic_auth
from bot.sandbox.misbehaviour import Dropped
from bot.sandbox.validation import SlackApiError

logger = logging.getLogger(__name__)


class Api(Protocol):
    """What the transport hands requests to (the sandbox)."""

    def call(
        self, method: str, args: dict[str, Any], token: str | None, *, client: Any
    ) -> dict[str, Any]: ...

    def respond(self, key: str, args: dict[str, Any]) -> None: ...


class ApiHandler(BaseHTTPRequestHandler):
    """HTTP in and out: Web API methods under ``/api/``, response URLs under ``/response/``."""

    owner: Api

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(format, *args)

    def do_GET(self) -> None:
        """Read methods (e.g. ``conversations.replies``) come as GET with a query string."""
        parts = urlsplit(self.path)
        args = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self._api(parts.path, args)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8") if length else ""
        args = _parse_body(raw, self.headers.get("Content-Type", ""))
        if self.path.startswith("/response/"):
            try:
                self.owner.respond(self.path.rsplit("/", 1)[1], args)
            except SlackApiError as exc:
                return self._send({"ok": False, "error": exc.error})
            return self._send({"ok": True})
        self._api(self.path, args)

    def _api(self, path: str, args: dict[str, Any]) -> None:
        if not path.startswith("/api/"):
            return self._send({"ok": False, "error": "unknown_method"}, status=404)
        header = self.headers.get("Authorization")
        token = _bearer(header) or args.pop("token", None)
        try:
            method, client = path[len("/api/") :], basic_auth(header)
            self._send(self.owner.call(method, args, token, client=client))
        except SlackApiError as exc:
            self._send({"ok": False, "error": exc.error})
        except Dropped:
            self.close_connection = True  # no status line at all: the caller sees it dropped

    def _send(self, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _bearer(header: str | None) -> str | None:
    if header and header.lower().startswith("bearer "):
        return header[7:].strip()
    return None


def _parse_body(raw: str, content_type: str) -> dict[str, Any]:
    if not raw:
        return {}
    if "json" in content_type:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}
    return {k: v[-1] for k, v in parse_qs(raw).items()}
