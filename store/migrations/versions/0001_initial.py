"""Initial schema: runs, approval requests, actions, decisions, audit events.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _ts(name: str, *, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(32)),
        sa.Column("enterprise_id", sa.String(32)),
        sa.Column("requester_id", sa.String(32), nullable=False),
        sa.Column("channel_id", sa.String(32), nullable=False),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("request_text", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("result_text", sa.Text),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_table(
        "approval_requests",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False, index=True),
        sa.Column("interrupt_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("policy_version", sa.String(64), nullable=False),
        sa.Column("team_id", sa.String(32)),
        sa.Column("enterprise_id", sa.String(32)),
        sa.Column("requester_id", sa.String(32), nullable=False),
        _ts("expires_at"),
        sa.Column("card_channel", sa.String(32)),
        sa.Column("card_ts", sa.String(32)),
        sa.Column("claimed_by", sa.String(128)),
        _ts("claim_expires_at", nullable=True),
        sa.Column("outcome", sa.Text),
        _ts("created_at"),
        _ts("resolved_at", nullable=True),
    )
    op.create_index("ix_approval_requests_status", "approval_requests", ["status"])
    op.create_table(
        "actions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "request_id",
            sa.String(64),
            sa.ForeignKey("approval_requests.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("tool_name", sa.String(255), nullable=False),
        sa.Column("args", sa.JSON, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("allowed_decisions", sa.JSON, nullable=False),
        sa.Column("approver_roles", sa.JSON, nullable=False),
        sa.Column("approvals_required", sa.Integer, nullable=False),
        sa.Column("self_approval", sa.Boolean, nullable=False),
        sa.Column("risk", sa.String(16), nullable=False),
        sa.Column("action_hash", sa.String(64), nullable=False),
        sa.Column("operation_id", sa.String(64), nullable=False),
        sa.Column("tool_call_id", sa.String(128)),
        sa.Column("outcome", sa.String(16)),
    )
    op.create_table(
        "decisions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "action_id", sa.String(64), sa.ForeignKey("actions.id"), nullable=False, index=True
        ),
        sa.Column(
            "request_id",
            sa.String(64),
            sa.ForeignKey("approval_requests.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("reviewer_id", sa.String(32), nullable=False),
        sa.Column("team_id", sa.String(32)),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("message", sa.Text),
        sa.Column("action_hash", sa.String(64), nullable=False),
        _ts("created_at"),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        _ts("created_at"),
        sa.Column("kind", sa.String(48), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("actor_id", sa.String(32)),
        sa.Column("team_id", sa.String(32)),
        sa.Column("run_id", sa.String(64), index=True),
        sa.Column("request_id", sa.String(64), index=True),
        sa.Column("action_id", sa.String(64)),
        sa.Column("reason", sa.Text),
        sa.Column("detail", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    for table in ("audit_events", "decisions", "actions", "approval_requests", "runs"):
        op.drop_table(table)
