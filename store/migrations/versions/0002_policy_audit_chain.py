"""Policy exemptions, reminders and a tamper-evident, append-only audit log.

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

APPEND_ONLY = ("audit_events", "decisions")


def upgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("exempt", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("remind_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("reminded_at", sa.DateTime(timezone=True)))
    with op.batch_alter_table("audit_events") as batch:
        batch.add_column(sa.Column("prev_hash", sa.String(64), nullable=False, server_default=""))
        batch.add_column(sa.Column("hash", sa.String(64), nullable=False, server_default=""))
    op.create_index("ix_approval_requests_expires_at", "approval_requests", ["expires_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$"
        )
        for table in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION refuse_change()"
            )
    else:
        for table in APPEND_ONLY:
            for verb in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
                )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in APPEND_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute("DROP FUNCTION IF EXISTS refuse_change()")
    else:
        for table in APPEND_ONLY:
            for verb in ("update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    op.drop_index("ix_approval_requests_expires_at", "approval_requests")
    with op.batch_alter_table("audit_events") as batch:
        batch.drop_column("hash")
        batch.drop_column("prev_hash")
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("reminded_at")
        batch.drop_column("remind_at")
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("exempt")
