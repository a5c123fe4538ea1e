"""Socket Mode, with the same shape check as HTTP mode before Bolt reads a delivery."""

from __future__ import annotations

import logging

from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk.socket_mode.builtin.client import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.app import Bot
from bot.listeners.payloads import MalformedPayload, parse_payload

logger = logging.getLogger(__name__)


class CheckedSocketModeHandler(SocketModeHandler):
    """Bolt's own middleware trips over some shapes (an ``event`` that is not an object) and
    then never acks, so Slack would deliver the same envelope again and again. Such an
    envelope is acked, logged and counted, and goes no further. (``handle`` takes the
    builtin client, as Bolt's own override does.)"""

    def __init__(self, bot: Bot, app_token: str) -> None:
        super().__init__(bot.app, app_token)
        self.bot = bot

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        try:
            parse_payload(req.payload)
        except MalformedPayload as exc:
            logger.warning("malformed Socket Mode delivery refused: %s", exc)
            self.bot.services.metrics.inc("malformed_requests")
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        services = self.bot.services
        with services.ack_first.answering(), services.metrics.ack_timer("socket"):
            super().handle(client, req)
