"""Medium-risk digests: which requests wait for a digest, the digest messages and their items.

Revision ID: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("approval_requests", sa.Column("digest_channel", sa.String(32)))
    op.create_table(
        "digest_messages",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("team_id", sa.String(32)),
        sa.Column("ts", sa.String(32)),
        sa.Column("posting_until", sa.DateTime(timezone=True)),
        sa.Column("drawn", sa.String(64)),
        sa.Column("settled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "digest_items",
        sa.Column(
            "request_id",
            sa.String(64),
            sa.ForeignKey("approval_requests.id"),
            primary_key=True,
        ),
        sa.Column("digest_id", sa.String(64), sa.ForeignKey("digest_messages.id"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
    )
    op.create_index("ix_digest_items_digest_id", "digest_items", ["digest_id"])


def downgrade() -> None:
    op.drop_index("ix_digest_items_digest_id", table_name="digest_items")
    op.drop_table("digest_items")
    op.drop_table("digest_messages")
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("digest_channel")
