"""A local HTTP server answering Slack Web API calls as Slack, or a gateway before it, would:
the answer is named by the method's name, ``<kind>.<error>`` (``slack.is_archived``: Slack's
JSON error on a 200; ``down.x``: Slack's JSON error on a 503; ``gateway.x``: a 502 page;
``proxy.x``: a page on a 200; anything else: a 429). For tests of what slack_sdk makes of
each."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Answers(BaseHTTPRequestHandler):
    """Answers every call with the status and body the path's last part names."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        kind, _, error = self.path.rsplit("/", 1)[-1].partition(".")
        json_type, html_type = "application/json", "text/html"
        if kind == "slack":
            status, body, content = 200, json.dumps({"ok": False, "error": error}), json_type
        elif kind == "down":  # Slack's own words, on an answer that is not a 200
            status, body, content = 503, json.dumps({"ok": False, "error": error}), json_type
        elif kind == "proxy":  # a page that is not Slack's, on a 200
            status, body, content = (
                200,
                "<html><body>Sign in to the network</body></html>",
                html_type,
            )
        elif kind == "gateway":
            status, body, content = 502, "<html><body>Bad gateway</body></html>", html_type
        else:
            status, body, content = (
                429,
                json.dumps({"ok": False, "error": "ratelimited"}),
                json_type,
            )
        self.send_response(status)
        self.send_header("Content-Type", content)
        self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_args: object) -> None:
        return None


@contextmanager
def answering() -> Iterator[str]:
    """The server's Web API base URL, while it runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/"
    finally:
        server.shutdown()
        server.server_close()
