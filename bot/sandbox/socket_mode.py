"""Socket Mode for the sandbox: ``apps.connections.open`` hands out a local WebSocket URL where
the sandbox plays Slack's side of the protocol (hello, envelopes, acks)."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve


class SocketModeRelay:
    def __init__(self) -> None:
        self._server: Server | None = None
        self._connections: list[ServerConnection] = []
        self._acks: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()

    def start(self) -> SocketModeRelay:
        self._server = serve(self._handle, "127.0.0.1", 0)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}/link"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def _handle(self, connection: ServerConnection) -> None:
        connection.send(
            json.dumps(
                {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0SANDBOX"}}
            )
        )
        with self._cond:
            self._connections.append(connection)
            self._cond.notify_all()
        try:
            for raw in connection:
                message = json.loads(raw)
                if "envelope_id" in message:
                    with self._cond:
                        self._acks[message["envelope_id"]] = message
                        self._cond.notify_all()
        except ConnectionClosed:
            pass  # the bot went away; a new connection may follow
        finally:
            with self._cond:
                self._connections.remove(connection)

    def wait_connected(self, timeout: float = 15.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._connections, timeout=timeout):
                raise TimeoutError("the bot never opened a Socket Mode connection")

    def send(self, kind: str, payload: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Deliver one envelope (slash_commands, interactive, events_api) and wait for its ack."""
        self.wait_connected(timeout)
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
        }
        with self._cond:
            connection = self._connections[-1]
        connection.send(json.dumps(envelope))
        with self._cond:
            if not self._cond.wait_for(lambda: envelope_id in self._acks, timeout=timeout):
                raise TimeoutError(f"no ack for envelope {envelope_id}")
            return self._acks.pop(envelope_id)
