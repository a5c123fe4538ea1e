"""The bot's Slack client retries what is worth retrying: rate limits and dropped connections."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from bot.settings import load_settings
from bot.slack_side import slack_client


@pytest.fixture
def flaky_slack() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server whose first connection is reset before any answer; later ones get a
    valid ``auth.test`` reply."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    seen: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if not seen:
                    seen.append("reset")
                    conn.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    )
                    continue
                seen.append("answered")
                body = json.dumps({"ok": True, "url": "https://acme.slack.com/"}).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/api/", seen
    server.close()


def test_a_dropped_connection_is_retried(flaky_slack, tmp_path):
    url, seen = flaky_slack
    settings = load_settings(
        slack_bot_token="xoxb-test",
        slack_signing_secret="s",
        slack_api_url=url,
        database_url=f"sqlite:///{tmp_path / 'x.db'}",
    )
    assert slack_client(settings).auth_test()["url"] == "https://acme.slack.com/"
    assert seen == ["reset", "answered"]
