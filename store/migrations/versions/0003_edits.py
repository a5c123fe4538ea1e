"""Edited actions: the reviewed arguments and the hash that approvals now bind to.

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("edited_args", sa.JSON))
        batch.add_column(sa.Column("current_hash", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("current_hash")
        batch.drop_column("edited_args")
