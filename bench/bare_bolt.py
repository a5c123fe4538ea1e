"""The floor of the ack figure: a Bolt app whose only listener acks every button, the least any
Slack app does, served like the bot (waitress, Bolt's WSGI adapter). Imports nothing of the bot,
so its memory is Bolt's own.

``python -m bench.bare_bolt --threads N --max-body BYTES`` with SLACK_SIGNING_SECRET,
SLACK_BOT_TOKEN and SLACK_API_URL set; logs the port it listens on, as ``serve`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient
from waitress.server import create_server

logger = logging.getLogger("bench.bare_bolt")


def build_app() -> App:
    client = WebClient(token=os.environ["SLACK_BOT_TOKEN"], base_url=os.environ["SLACK_API_URL"])
    app = App(
        client=client,
        signing_secret=os.environ["SLACK_SIGNING_SECRET"],
        process_before_response=False,
        token_verification_enabled=True,
    )

    @app.action(re.compile(".*"))
    def only_ack(ack: Any) -> None:
        ack()

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_bolt")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--max-body", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    serve(build_app(), threads=args.threads, max_body=args.max_body)


def serve(app: App, *, threads: int, max_body: int) -> None:
    """Serve ``app`` as the bot serves itself (waitress, Bolt's WSGI adapter) on a free port,
    and log it in the line the benchmark waits for."""
    server: Any = create_server(
        SlackRequestHandler(app, path="/slack/events"),
        host="127.0.0.1",
        port=0,
        threads=threads,
        max_request_body_size=max_body,
    )
    logger.info("serving HTTP on 127.0.0.1:%s (POST /slack/events)", server.effective_port)
    server.run()


if __name__ == "__main__":
    main()
