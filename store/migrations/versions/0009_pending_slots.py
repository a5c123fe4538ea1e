"""Open review slots: one row per approver role of each open action of a pending request,
so a reviewer's pending list is an index range instead of a scan of every action's roles.

The rows are filled from the requests and actions as they stand.

Revision ID: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Each role in an action's JSON list, as a row: the two backends spell it differently.
_ROLES = {
    "postgresql": "CROSS JOIN LATERAL json_array_elements_text(a.approver_roles::json) AS r(role)",
    "sqlite": "JOIN json_each(a.approver_roles) AS r",
}
_ROLE = {"postgresql": "r.role", "sqlite": "r.value"}


def upgrade() -> None:
    op.create_table(
        "pending_slots",
        sa.Column("action_id", sa.String(64), sa.ForeignKey("actions.id"), primary_key=True),
        sa.Column("role", sa.String(255), primary_key=True),
        sa.Column(
            "request_id", sa.String(64), sa.ForeignKey("approval_requests.id"), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requester_id", sa.String(32), nullable=False),
    )
    op.create_index("ix_pending_slots_request_id", "pending_slots", ["request_id"])
    op.create_index(
        "ix_pending_slots_role_expiry", "pending_slots", ["role", "expires_at", "request_id"]
    )
    dialect = op.get_bind().dialect.name
    op.execute(
        "INSERT INTO pending_slots (action_id, role, request_id, expires_at, requester_id) "
        f"SELECT DISTINCT a.id, {_ROLE[dialect]}, a.request_id, q.expires_at, q.requester_id "
        f"FROM actions a JOIN approval_requests q ON q.id = a.request_id {_ROLES[dialect]} "
        "WHERE q.status = 'pending' AND a.outcome IS NULL"
    )


def downgrade() -> None:
    op.drop_table("pending_slots")
