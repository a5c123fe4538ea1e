"""What reviewers are shown beyond name and arguments: review kind, preview, subagent.

Revision ID: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("extra", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("extra")
