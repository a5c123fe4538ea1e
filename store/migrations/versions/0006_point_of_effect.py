"""Point-of-effect gate: one execution row per approved action (replaces the effects ledger).

Revision ID: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "action_executions",
        sa.Column("action_id", sa.String(64), sa.ForeignKey("actions.id"), primary_key=True),
        sa.Column("idempotency_key", sa.String(255), nullable=False, unique=True),
        sa.Column("tool_call_id", sa.String(128)),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("result", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
    )
    op.drop_table("tool_effects")


def downgrade() -> None:
    op.create_table(
        "tool_effects",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.drop_table("action_executions")
