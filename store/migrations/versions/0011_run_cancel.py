"""Cancelled runs: who cancelled a run, and when.

Revision ID: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("cancelled_by", sa.String(32)))
    op.add_column("runs", sa.Column("cancelled_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("cancelled_at")
        batch.drop_column("cancelled_by")
