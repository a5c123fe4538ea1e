"""The operators' kill switch: one row saying whether gated execution is paused, and why.

Revision ID: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    switch = op.create_table(
        "execution_switch",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("changed_by", sa.String(64)),
        sa.Column("changed_at", sa.DateTime(timezone=True)),
    )
    op.bulk_insert(switch, [{"id": 1, "paused": False}])


def downgrade() -> None:
    op.drop_table("execution_switch")
