"""Schema migrations (Alembic), run programmatically so operators need no alembic.ini."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text, update

from store.audit_chain import AuditChainError, head_mac, head_problem
from store.audit_log import AuditRepository
from store.audit_models import AUDIT_SHARDS, AuditEvent, AuditHead
from store.db import Database

MIGRATIONS = Path(__file__).parent / "migrations"
MIGRATION_LOCK_KEY = 0x4D49_4752_4154_4521  # one lock for whoever migrates this database


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, *, audit_key: bytes | None = None) -> str:
    """Bring the store to the newest revision; running it again changes nothing.

    A store created here with ``audit_key`` (AUDIT_KEY) has its audit log keyed from the first
    event. An existing store is never keyed here: that is ``approval-bot audit seal``, run by an
    operator who has checked the log, since sealing vouches for what is already there."""
    config = _config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Replicas (or operators) upgrading at once take turns; the later ones find the
            # store at head and change nothing. SQLite's write lock already serializes this.
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
        created = MigrationContext.configure(connection).get_current_revision() is None
        config.attributes["connection"] = connection
        config.attributes["audit_key"] = audit_key  # a keyed log's new shards are keyed with it
        command.upgrade(config, "head")
        if created and audit_key is not None:
            _key_new_audit_log(connection, audit_key)
    return head_revision()


def prepare(db: Database) -> str:
    """Start-up: check AUDIT_KEY against an existing audit log *before* migrating, so a wrong
    key changes nothing, then migrate and check again (a new store is keyed by the migration).
    Raises ``AuditChainError`` saying what does not fit."""
    if _has_audit_head(db.engine):
        _check_audit_key(db)
    revision = upgrade(db.engine, audit_key=db.audit_key)
    _check_audit_key(db)
    return revision


def _has_audit_head(engine: Engine) -> bool:
    with engine.connect() as connection:
        return inspect(connection).has_table(AuditHead.__tablename__)


def _check_audit_key(db: Database) -> None:
    with db.engine.connect() as connection:
        columns = inspect(connection).get_columns(AuditEvent.__tablename__)
    if not any(column["name"] == "shard" for column in columns):
        _check_single_chain_key(db)
        return
    with db.transaction() as session:
        AuditRepository(session).check_key()


def _check_single_chain_key(db: Database) -> None:
    """A log from before the shards: its one head (row 1) is what shard 0's head becomes."""
    with db.engine.connect() as connection:
        row = connection.execute(
            text(
                "SELECT event_count, last_event_id, last_hash, keyed_from, mac "
                "FROM audit_head WHERE id = 1"
            )
        )
        found = row.mappings().first()
    head = AuditHead(id=0, **found) if found is not None else None
    problem = head_problem(head, db.audit_key)
    if problem is not None:
        raise AuditChainError(f"audit log: {problem}")


def _key_new_audit_log(connection: Connection, key: bytes) -> None:
    for shard in range(AUDIT_SHARDS):
        head = AuditHead(id=shard, event_count=0, last_event_id=None, last_hash="", keyed_from=1)
        connection.execute(
            update(AuditHead)
            .where(AuditHead.id == shard, AuditHead.event_count == 0)
            .values(keyed_from=1, mac=head_mac(head, key))
        )


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
