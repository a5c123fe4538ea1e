"""Audit log anchor: the chain's head in its own row, and no truncation or replacement of the
append-only tables.

The head starts from the log as it stands (unkeyed); ``approval-bot audit seal`` keys it.
PostgreSQL refuses TRUNCATE by trigger. SQLite's ``REPLACE INTO`` deletes the old row without
firing delete triggers (unless a connection turns ``recursive_triggers`` on, which an intruder's
connection would not), so a BEFORE INSERT trigger refuses any insert over an existing id.

Revision ID: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

APPEND_ONLY = ("audit_events", "decisions")


def upgrade() -> None:
    op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_count", sa.Integer, nullable=False),
        sa.Column("last_event_id", sa.Integer),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.Column("keyed_from", sa.Integer),
        sa.Column("mac", sa.String(64), nullable=False),
        sa.CheckConstraint("id = 1", name="ck_audit_head_single_row"),
    )
    op.execute(
        "INSERT INTO audit_head (id, event_count, last_event_id, last_hash, keyed_from, mac) "
        "SELECT 1, (SELECT COUNT(*) FROM audit_events), (SELECT MAX(id) FROM audit_events), "
        "COALESCE((SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1), ''), NULL, ''"
    )
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_guards()
    else:
        _sqlite_guards()


def _postgresql_guards() -> None:
    for table in APPEND_ONLY:
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION refuse_change()"
        )
    op.execute(
        "CREATE FUNCTION refuse_removal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION '% cannot be removed', TG_TABLE_NAME; END $$"
    )
    op.execute(
        "CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head "
        "FOR EACH ROW EXECUTE FUNCTION refuse_removal()"
    )
    op.execute(
        "CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head "
        "FOR EACH STATEMENT EXECUTE FUNCTION refuse_removal()"
    )


def _sqlite_guards() -> None:
    guarded = {table: f"{table} is append-only" for table in APPEND_ONLY}
    guarded["audit_head"] = "audit_head cannot be removed"
    for table, message in guarded.items():
        op.execute(
            f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
            f"WHEN EXISTS (SELECT 1 FROM {table} WHERE id = NEW.id) "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )
    op.execute(
        "CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head "
        "BEGIN SELECT RAISE(ABORT, 'audit_head cannot be removed'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in APPEND_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        op.drop_table("audit_head")
        op.execute("DROP FUNCTION IF EXISTS refuse_removal()")
        return
    for table in APPEND_ONLY:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_replace")
    op.drop_table("audit_head")
