"""Lists for people: who opened the Home tab (their Home is republished when something of
theirs changes), review slots ordered by the request's age (what waited longest first), and
indexes for "your runs" and "recently decided by you".

Revision ID: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "home_viewers",
        sa.Column("user_id", sa.String(32), primary_key=True),
        sa.Column("team_id", sa.String(32)),
        sa.Column("enterprise_id", sa.String(32)),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_runs_requester_created", "runs", ["requester_id", "created_at"])
    op.create_index("ix_decisions_reviewer_created", "decisions", ["reviewer_id", "created_at"])
    with op.batch_alter_table("pending_slots") as batch:
        batch.add_column(sa.Column("created_at", sa.DateTime(timezone=True)))
    op.execute(
        "UPDATE pending_slots SET created_at = (SELECT q.created_at FROM approval_requests q "
        "WHERE q.id = pending_slots.request_id)"
    )
    with op.batch_alter_table("pending_slots") as batch:
        batch.alter_column("created_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.drop_index("ix_pending_slots_role_expiry")
        batch.create_index("ix_pending_slots_role_created", ["role", "created_at", "request_id"])


def downgrade() -> None:
    with op.batch_alter_table("pending_slots") as batch:
        batch.drop_index("ix_pending_slots_role_created")
        batch.create_index("ix_pending_slots_role_expiry", ["role", "expires_at", "request_id"])
        batch.drop_column("created_at")
    op.drop_index("ix_decisions_reviewer_created", table_name="decisions")
    op.drop_index("ix_runs_requester_created", table_name="runs")
    op.drop_table("home_viewers")
