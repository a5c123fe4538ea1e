"""Audit log in shards: one chain and one head per shard, so appends for different runs do not
take turns on one lock.

The existing chain becomes shard 0 and its head the shard-0 head, keyed or sealed as it was
(shard 0's head MAC has the form the single head had). The new shards' heads start empty; in a
keyed log they are keyed too, which needs AUDIT_KEY (``store.migrate`` hands it over): without
it, or with another key, the upgrade is refused and nothing changes.

Revision ID: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from store.audit_chain import head_mac, head_problem
from store.audit_models import AuditHead

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SHARDS = 16  # store.audit_models.AUDIT_SHARDS when this revision was written
HEAD_COLUMNS = "id, event_count, last_event_id, last_hash, keyed_from, mac"


def upgrade() -> None:
    op.add_column(
        "audit_events", sa.Column("shard", sa.Integer, nullable=False, server_default="0")
    )
    bind = op.get_bind()
    row = bind.execute(sa.text(f"SELECT {HEAD_COLUMNS} FROM audit_head WHERE id = 1")).mappings()
    old = dict(row.one())
    old["id"] = 0
    _rebuild_head(f"id >= 0 AND id < {SHARDS}", name="ck_audit_head_shard")
    heads = [old] + [
        _empty_head(shard, keyed=old["keyed_from"] is not None) for shard in range(1, SHARDS)
    ]
    if old["keyed_from"] is not None:
        _key_new_heads(heads)
    bind.execute(sa.table("audit_head", *map(sa.column, HEAD_COLUMNS.split(", "))).insert(), heads)


def _empty_head(shard: int, *, keyed: bool) -> dict[str, object]:
    return {
        "id": shard,
        "event_count": 0,
        "last_event_id": None,
        "last_hash": "",
        "keyed_from": 1 if keyed else None,
        "mac": "",
    }


def _key_new_heads(heads: list[dict[str, object]]) -> None:
    """A keyed log's new heads are keyed with the key the old head holds with."""
    key = op.get_context().config.attributes.get("audit_key")  # type: ignore[union-attr]
    problem = head_problem(AuditHead(**heads[0]), key)
    if problem is not None or key is None:
        raise RuntimeError(f"audit log: {problem}; the upgrade to shards needs its AUDIT_KEY")
    for head in heads[1:]:
        head["mac"] = head_mac(AuditHead(**head), key)


def _rebuild_head(check: str, *, name: str) -> None:
    """A new ``audit_head`` with ``check`` on its id, and its guards (rows cannot be removed,
    nor replaced on SQLite); the old table and its rows go."""
    op.execute("ALTER TABLE audit_head RENAME TO audit_head_old")
    op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_count", sa.Integer, nullable=False),
        sa.Column("last_event_id", sa.Integer),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.Column("keyed_from", sa.Integer),
        sa.Column("mac", sa.String(64), nullable=False),
        sa.CheckConstraint(check, name=name),
    )
    op.drop_table("audit_head_old")
    if op.get_bind().dialect.name == "postgresql":
        for when, each in (("DELETE", "ROW"), ("TRUNCATE", "STATEMENT")):
            op.execute(
                f"CREATE TRIGGER audit_head_no_{when.lower()} BEFORE {when} ON audit_head "
                f"FOR EACH {each} EXECUTE FUNCTION refuse_removal()"
            )
        return
    op.execute(
        "CREATE TRIGGER audit_head_no_replace BEFORE INSERT ON audit_head "
        "WHEN EXISTS (SELECT 1 FROM audit_head WHERE id = NEW.id) "
        "BEGIN SELECT RAISE(ABORT, 'audit_head cannot be removed'); END"
    )
    op.execute(
        "CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head "
        "BEGIN SELECT RAISE(ABORT, 'audit_head cannot be removed'); END"
    )


def downgrade() -> None:
    """Back to one chain: only while every event is still in shard 0."""
    bind = op.get_bind()
    used = bind.execute(
        sa.text("SELECT COUNT(*) FROM audit_head WHERE id <> 0 AND event_count <> 0")
    ).scalar_one()
    if (
        used
        or bind.execute(sa.text("SELECT COUNT(*) FROM audit_events WHERE shard <> 0")).scalar_one()
    ):
        raise RuntimeError("audit log: events were written to other shards; cannot downgrade")
    row = bind.execute(sa.text(f"SELECT {HEAD_COLUMNS} FROM audit_head WHERE id = 0")).mappings()
    old = dict(row.one())
    old["id"] = 1
    _rebuild_head("id = 1", name="ck_audit_head_single_row")
    bind.execute(sa.table("audit_head", *map(sa.column, HEAD_COLUMNS.split(", "))).insert(), [old])
    op.execute("ALTER TABLE audit_events DROP COLUMN shard")
