"""What an approval was given against besides its arguments: the environment, and each action's
tool version and argument-schema version.

Revision ID: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("environment", sa.String(64)))
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("tool_version", sa.String(64)))
        batch.add_column(sa.Column("schema_version", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("schema_version")
        batch.drop_column("tool_version")
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("environment")
