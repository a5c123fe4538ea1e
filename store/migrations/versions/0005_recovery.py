"""Crash recovery: the effects ledger, card and result bookkeeping, and store metadata.

Revision ID: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_effects",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "store_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("card_status", sa.String(16)))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("result_posted", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("result_posted")
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("card_status")
    op.drop_table("store_meta")
    op.drop_table("tool_effects")
