"""The ``approval-bot`` command: serve, demo, db upgrade, audit export, verify and seal."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from agent_runtime.errors import ApprovalError
from bot import logs
from bot.settings import ConfigError, Settings, load_settings
from store.audit_chain import AuditChainError
from store.db import Database, DatabaseUnavailableError, check_database

logger = logging.getLogger("approval-bot")
EXIT_BROKEN, EXIT_CONFIG, EXIT_UNKEYED, EXIT_UNSEALED = 1, 2, 3, 4


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
    export.add_argument("--since", type=_when, help="from this UTC time (e.g. 2026-12-01T09:00)")
    export.add_argument("--until", type=_when, help="before this UTC time")
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
            return _db_prune(args.older_than)
        if args.command == "db":
            return _db_upgrade()
        if args.command == "audit" and args.audit_command == "verify":
            return _audit_verify(args.expect)
        if args.command == "audit" and args.audit_command == "seal":
            return _audit_seal(events=args.events, last_hash=args.last_hash)
        if args.command == "audit":
            return _audit_export(args)
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
    db = _database(settings)
    try:
        return run_switch(settings, db, pause=pause, reason=reason)
    finally:
        db.dispose()


def _database(settings: Settings, *, migrated: bool = True) -> Database:
    """Open the store after one connection check, so an unusable DATABASE_URL is one line;
    ``migrated``: the store must already be at the newest revision."""
    check_database(settings.database_url, create=not migrated)
    db = Database(settings.database_url, audit_key=settings.audit_hmac_key())
    if migrated:
        from store.migrate import current_revision, head_revision

        if current_revision(db.engine) != head_revision():
            db.dispose()
            raise ConfigError(
                "DATABASE_URL: the store is not set up or not up to date; "
                "run approval-bot db upgrade"
            )
    return db


def _db_upgrade() -> int:
    from agent_runtime.graph_runtime import close_checkpointer, open_checkpointer
    from store.migrate import upgrade

    settings = load_settings()
    db = _database(settings, migrated=False)
    revision = upgrade(db.engine, audit_key=settings.audit_hmac_key())
    close_checkpointer(open_checkpointer(settings.database_url))
    db.dispose()
    print(f"store at revision {revision}; checkpointer tables ready")
    return 0


def _db_prune(older_than: str) -> int:
    from agent_runtime.graph_runtime import close_checkpointer, open_checkpointer
    from agent_runtime.policy import parse_duration
    from agent_runtime.retention import prune_checkpoints, prune_inbox

    try:
        span = parse_duration(older_than)
    except ValueError as exc:
        raise ConfigError(f"--older-than: {exc}") from None
    settings = load_settings()
    db = _database(settings)
    checkpointer = open_checkpointer(settings.database_url, key=settings.encryption_key())
    count = prune_checkpoints(db, checkpointer, older_than=span)  # type: ignore[arg-type]
    items = prune_inbox(db, older_than=span)  # type: ignore[arg-type]
    close_checkpointer(checkpointer)
    db.dispose()
    print(f"deleted the checkpoints of {count} finished runs older than {older_than}")
    print(f"deleted {items} stored clicks worked on before then")
    return 0


def _when(text: str) -> dt.datetime:
    """An ISO date or time, UTC unless it says otherwise."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        message = f"{text!r} is not a date or time like 2026-12-01T09:00"
        raise argparse.ArgumentTypeError(message) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _audit_export(args: argparse.Namespace) -> int:
    from store.audit_export import ExportFilter, export

    only = ExportFilter(
        run_id=args.run, actor_id=args.actor, tool=args.tool, since=args.since, until=args.until
    )
    db = _database(load_settings())
    with db.transaction() as session:
        export(session, sys.stdout, fmt=args.format, only=only)
    db.dispose()
    return 0


def _audit_verify(expect: str | None) -> int:
    """Exit 0 only when intact (keyed and nothing wrong), 1 when something is wrong, 3 when
    nothing is wrong but the log is unkeyed, so a rewrite with database access would not show,
    4 when AUDIT_KEY is set but the log has not been sealed with it."""
    from store.audit_chain import Expected
    from store.repositories import AuditRepository

    try:
        expected = Expected.parse(expect) if expect is not None else None
    except ValueError as exc:
        raise ConfigError(f"--expect: {exc}") from None
    db = _database(load_settings())
    with db.transaction() as session:
        report = AuditRepository(session).verify(expect=expected)
    db.dispose()
    if report.problem is not None:
        print(f"audit log not intact: {report.problem}")
        return EXIT_BROKEN
    if report.unsealed:
        print(
            f"audit log unsealed: {report.checked} events link up, but AUDIT_KEY is set and the "
            "log is not keyed with it. If this log was never keyed, seal it with the values an "
            "`audit verify` printed before AUDIT_KEY existed: stop every replica, run "
            "`approval-bot audit seal --events N --last-hash H`, then start them with the key. "
            "If it was ever keyed, it was rewritten without the key: do not seal it."
        )
        return EXIT_UNSEALED
    if not report.keyed:
        print(
            f"audit log unkeyed: {report.checked} events link up, but AUDIT_KEY is not set, so "
            "anyone with write access to the database could have rewritten them. To seal it "
            f"later, keep: --events {report.checked} --last-hash {report.last_hash or '-'}"
        )
        return EXIT_UNKEYED
    sealed = (
        f"; the first {report.sealed}, written before AUDIT_KEY was set, are sealed by it"
        if report.sealed
        else ""
    )
    print(
        f"audit log intact: {report.checked} events, keyed{sealed} (head {report.fingerprint}; "
        "keep it elsewhere and check later with --expect)"
    )
    return 0


def _audit_seal(*, events: int, last_hash: str) -> int:
    from store.repositories import AuditRepository

    settings = load_settings()
    if settings.audit_key is None:
        raise ConfigError("AUDIT_KEY is required to seal the audit log; set it first")
    db = _database(settings)
    with db.transaction() as session:
        seal = AuditRepository(session).seal(events=events, last_hash=last_hash.replace("-", ""))
    db.dispose()
    if seal.already:
        print(f"audit log already sealed with AUDIT_KEY (after {seal.events} unkeyed events)")
    else:
        print(
            f"audit log sealed: you vouched for {seal.events} events ending at "
            f"{seal.last_hash or 'nothing (an empty log)'}; they are anchored by AUDIT_KEY and "
            "new events are keyed"
        )
    return 0


def _serve(host: str, port: int, *, force_http: bool) -> int:
    settings = load_settings()
    socket_mode = settings.socket_mode and not force_http
    settings.require_slack(http=not socket_mode)
    check_database(settings.database_url)
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
