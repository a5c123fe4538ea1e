"""Decision inbox: acked clicks and submissions, stored before the ack; and the attempt that
recorded each decision, so a redo after a crash records nothing twice.

Revision ID: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox_items",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("claimed_by", sa.String(128)),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("last_error", sa.Text),
    )
    op.create_index("ix_inbox_items_status_id", "inbox_items", ["status", "id"])
    op.add_column("decisions", sa.Column("attempt_key", sa.String(64)))
    op.create_index("ix_decisions_attempt_key", "decisions", ["attempt_key"])


def downgrade() -> None:
    op.drop_index("ix_decisions_attempt_key", table_name="decisions")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("attempt_key")
    op.drop_index("ix_inbox_items_status_id", table_name="inbox_items")
    op.drop_table("inbox_items")
