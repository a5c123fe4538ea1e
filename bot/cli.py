"""The ``approval-bot`` command: serve, demo, db upgrade, audit export, verify and seal."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from agent_runtime.errors import ApprovalError
from bot import logs
from bot.settings import ConfigError, load_settings
from bot.store_cli import (
    audit_export,
    audit_seal,
    audit_verify,
    db_prune,
    db_upgrade,
    open_database,
    parse_when,
)
from store.audit_chain import AuditChainError
from store.db import DatabaseUnavailableError, check_database

logger = logging.getLogger("approval-bot")
EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="approval-bot", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the bot (Socket Mode if SLACK_APP_TOKEN is set)")
    serve.add_argument("--port", type=int, default=3000)
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument(
        "--http", action="store_true", help="HTTP mode even if SLACK_APP_TOKEN is set"
    )
    commands.add_parser(
        "worker", help="work on stored clicks and submissions only (no HTTP, no Socket Mode)"
    )
    commands.add_parser("demo", help="an offline walkthrough in a local Slack sandbox")
    pause = commands.add_parser("pause", help="stop all gated execution (the kill switch)")
    pause.add_argument("--reason", help="shown in the escalation channel and refusals")
    commands.add_parser("resume", help="let gated execution run again")
    db = commands.add_parser("db", help="database commands")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    db_commands.add_parser(
        "upgrade", help="create or migrate the store and the checkpointer tables"
    )
    prune = db_commands.add_parser(
        "prune", help="delete finished runs' checkpoints and worked-on stored clicks"
    )
    prune.add_argument("--older-than", default="30d", help="e.g. 30d, 12h (default 30d)")
    audit = commands.add_parser("audit", help="audit log commands")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    export = audit_commands.add_parser("export", help="write the audit log")
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--run", help="only this run's events")
    export.add_argument("--actor", help="only events by this Slack user (or cli:<user>)")
    export.add_argument("--tool", help="only events about this tool")
    export.add_argument(
        "--since", type=parse_when, help="from this UTC time (e.g. 2026-12-01T09:00)"
    )
    export.add_argument("--until", type=parse_when, help="before this UTC time")
    verify = audit_commands.add_parser("verify", help="check the audit log's chain and its head")
    verify.add_argument(
        "--expect",
        metavar="N:FINGERPRINT",
        help="a head fingerprint printed by an earlier verify: the log must still hold it",
    )
    seal = audit_commands.add_parser(
        "seal", help="key an audit log that was never keyed (stop every replica first)"
    )
    seal.add_argument(
        "--events", type=int, required=True, help="as printed by `audit verify` before the key"
    )
    seal.add_argument(
        "--last-hash", required=True, help="as printed by `audit verify` before the key"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.configure(
        level=logging.INFO if args.command in ("serve", "worker") else logging.WARNING,
        fmt=_log_format(),
    )
    try:
        if args.command == "worker":
            return _worker()
        if args.command == "demo":
            from bot.demo import run_demo

            return run_demo()
        if args.command in ("pause", "resume"):
            return _switch(pause=args.command == "pause", reason=getattr(args, "reason", None))
        if args.command == "db" and args.db_command == "prune":
            return db_prune(args.older_than)
        if args.command == "db":
            return db_upgrade()
        if args.command == "audit" and args.audit_command == "verify":
            return audit_verify(args.expect)
        if args.command == "audit" and args.audit_command == "seal":
            return audit_seal(events=args.events, last_hash=args.last_hash)
        if args.command == "audit":
            return audit_export(args)
        return _serve(args.host, args.port, force_http=args.http)
    except (ConfigError, ApprovalError, AuditChainError, DatabaseUnavailableError) as exc:
        print(f"approval-bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _log_format() -> str:
    """LOG_FORMAT before anything else is read; an invalid setting is reported by the command
    itself (it loads the settings again), in text."""
    try:
        return load_settings().log_format
    except ConfigError:
        return "text"


def _switch(*, pause: bool, reason: str | None) -> int:
    from bot.switch_cli import run_switch

    settings = load_settings()
    db = open_database(settings)
    try:
        return run_switch(settings, db, pause=pause, reason=reason)
    finally:
        db.dispose()


def _serve(host: str, port: int, *, force_http: bool) -> int:
    settings = load_settings()
    socket_mode = settings.socket_mode and not force_http
    settings.require_slack(http=not socket_mode)
    check_database(settings.database_url)
    settings.tune_interpreter()
    from bot.app import build_bot

    bot = build_bot(settings, http=not socket_mode)
    # Before anything says it is serving: a SIGTERM right after that must find the handler.
    stop = _stop_on_signals()
    from bot.http_server import start_admin_server

    admin = start_admin_server(bot)
    bot.start_background()
    if socket_mode:
        from bot.socket_mode import CheckedSocketModeHandler

        assert settings.slack_app_token is not None
        handler = CheckedSocketModeHandler(bot, settings.slack_app_token.get_secret_value())
        handler.connect()
        logger.info("serving in Socket Mode")
        _wait_for(stop)
        bot.stopping.set()
        handler.close()
    else:
        from bot.http_server import make_server

        server = make_server(bot, host=host, port=port).start()
        logger.info("serving HTTP on %s:%s (POST /slack/events)", host, server.port)
        if settings.multi_workspace:
            logger.info("workspaces install the bot at GET /slack/install")
        _wait_for(stop)
        bot.stopping.set()
        server.stop()
    bot.close()
    admin.stop()
    return 0


def _worker() -> int:
    """Inbox workers only: for operators who keep decision work off the processes that ack."""
    settings = load_settings()
    settings.require_slack(http=False)
    check_database(settings.database_url)
    from bot.app import build_bot

    bot = build_bot(settings, http=False)
    stop = _stop_on_signals()
    from bot.http_server import start_admin_server

    admin = start_admin_server(bot)
    bot.inbox.start()
    logger.info("working on the decision inbox with %d workers", settings.worker_threads)
    _wait_for(stop)
    bot.close()
    admin.stop()
    return 0


SIGNAL_POLL_SECONDS = 0.5


def _stop_on_signals() -> threading.Event:
    """SIGTERM and SIGINT set the returned event (a second one exits at once)."""
    stop = threading.Event()

    def handle(signum: int, _frame: object) -> None:
        if stop.is_set():
            logger.warning("second signal: exiting now, without waiting for in-flight work")
            logs.flush(timeout=1.0)  # the lines queued so far, this one included
            os._exit(1)
        logger.info("signal %s: finishing in-flight work, then stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


def _wait_for(stop: threading.Event) -> None:
    """Python runs signal handlers on the main thread, between bytecodes. The kernel may deliver
    the signal to any thread; a main thread blocked on the event for good would never run it."""
    while not stop.wait(timeout=SIGNAL_POLL_SECONDS):
        pass
