"""The store's commands: ``db upgrade``, ``db prune``, ``audit export``, ``verify`` and
``seal``. Each opens the store after one connection check, so an unusable DATABASE_URL is one
line."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from bot.settings import ConfigError, Settings, load_settings
from store.db import Database, check_database

EXIT_BROKEN, EXIT_UNKEYED, EXIT_UNSEALED = 1, 3, 4


def open_database(settings: Settings, *, migrated: bool = True) -> Database:
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


def db_upgrade() -> int:
    from agent_runtime.graph_runtime import close_checkpointer, open_checkpointer
    from store.migrate import upgrade

    settings = load_settings()
    db = open_database(settings, migrated=False)
    revision = upgrade(db.engine, audit_key=settings.audit_hmac_key())
    close_checkpointer(open_checkpointer(settings.database_url))
    db.dispose()
    print(f"store at revision {revision}; checkpointer tables ready")
    return 0


def db_prune(older_than: str) -> int:
    from agent_runtime.graph_runtime import close_checkpointer, open_checkpointer
    from agent_runtime.policy import parse_duration
    from agent_runtime.retention import prune_checkpoints, prune_inbox

    try:
        span = parse_duration(older_than)
    except ValueError as exc:
        raise ConfigError(f"--older-than: {exc}") from None
    settings = load_settings()
    db = open_database(settings)
    checkpointer = open_checkpointer(settings.database_url, key=settings.encryption_key())
    count = prune_checkpoints(db, checkpointer, older_than=span)  # type: ignore[arg-type]
    items = prune_inbox(db, older_than=span)  # type: ignore[arg-type]
    close_checkpointer(checkpointer)
    db.dispose()
    print(f"deleted the checkpoints of {count} finished runs older than {older_than}")
    print(f"deleted {items} stored clicks worked on before then")
    return 0


def parse_when(text: str) -> dt.datetime:
    """An ISO date or time, UTC unless it says otherwise."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        message = f"{text!r} is not a date or time like 2026-12-01T09:00"
        raise argparse.ArgumentTypeError(message) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def audit_export(args: argparse.Namespace) -> int:
    from store.audit_export import ExportFilter, export

    only = ExportFilter(
        run_id=args.run, actor_id=args.actor, tool=args.tool, since=args.since, until=args.until
    )
    db = open_database(load_settings())
    with db.transaction() as session:
        export(session, sys.stdout, fmt=args.format, only=only)
    db.dispose()
    return 0


def audit_verify(expect: str | None) -> int:
    """Exit 0 only when intact (keyed and nothing wrong), 1 when something is wrong, 3 when
    nothing is wrong but the log is unkeyed, so a rewrite with database access would not show,
    4 when AUDIT_KEY is set but the log has not been sealed with it."""
    from store.audit_chain import Expected
    from store.repositories import AuditRepository

    try:
        expected = Expected.parse(expect) if expect is not None else None
    except ValueError as exc:
        raise ConfigError(f"--expect: {exc}") from None
    db = open_database(load_settings())
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


def audit_seal(*, events: int, last_hash: str) -> int:
    from store.repositories import AuditRepository

    settings = load_settings()
    if settings.audit_key is None:
        raise ConfigError("AUDIT_KEY is required to seal the audit log; set it first")
    db = open_database(settings)
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
