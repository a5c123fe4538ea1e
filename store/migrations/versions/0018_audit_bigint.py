"""Audit event ids as 64-bit integers on PostgreSQL: ids are taken a few at a time with a
chain's lock (those not used leave gaps), and a busy log would reach the 32-bit limit in years,
not decades. SQLite's integers are 64-bit already. PostgreSQL rewrites the table under an
exclusive lock: appends (every decision makes one) wait until it is done.

Revision ID: 0018
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_SEQUENCE_AS = (
    "DO $$ BEGIN EXECUTE format('ALTER SEQUENCE %s AS {type}', "
    "pg_get_serial_sequence('audit_events', 'id')); END $$"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE audit_events ALTER COLUMN id TYPE bigint")
    op.execute(_SEQUENCE_AS.format(type="bigint"))
    op.execute("ALTER TABLE audit_head ALTER COLUMN last_event_id TYPE bigint")


def downgrade() -> None:
    """Refused by PostgreSQL once an id, or the sequence, is past the 32-bit limit (ids taken
    and not used count too): nothing is cut short."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE audit_head ALTER COLUMN last_event_id TYPE integer")
    op.execute(_SEQUENCE_AS.format(type="integer"))
    op.execute("ALTER TABLE audit_events ALTER COLUMN id TYPE integer")
