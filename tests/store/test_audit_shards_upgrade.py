"""Upgrading a log written as one chain (revision 0007) to shards: it becomes shard 0, keyed or
sealed as it was, and what an operator kept before the upgrade still checks out."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text

from store.audit_chain import AuditChainError, Expected, digest
from store.audit_models import AuditEvent
from store.db import Database
from store.migrate import MIGRATIONS, current_revision, prepare, upgrade
from store.models import utcnow
from store.repositories import AuditRepository
from tests.store.audit_env import INTRUDER_KEY, KEY, check, old_append
from tests.store.test_audit_shards import append_for, runs_in_distinct_shards


def _migrate_to(db: Database, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def _old_head_mac(key: bytes, head: dict[str, object]) -> str:
    """The single head's MAC as the release before the shards computed it."""
    fields = [head["event_count"], head["last_event_id"], head["last_hash"], head["keyed_from"]]
    message = "audit-head\n" + json.dumps(fields, separators=(",", ":"))
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def _old_head(conn: Connection) -> dict[str, object]:
    row = conn.execute(text("SELECT * FROM audit_head WHERE id = 1")).mappings().one()
    return dict(row)


def _old_seal(conn: Connection) -> None:
    head = _old_head(conn)
    head["keyed_from"] = int(str(head["event_count"])) + 1
    conn.execute(
        text("UPDATE audit_head SET keyed_from = :k, mac = :m WHERE id = 1"),
        {"k": head["keyed_from"], "m": _old_head_mac(KEY, head)},
    )


def _old_keyed_append(conn: Connection, kind: str, *, run_id: str) -> str:
    """A keyed append as the single-chain release made it; returns its fingerprint ``N:FP``."""
    head = _old_head(conn)
    event = AuditEvent(kind=kind, outcome="info", run_id=run_id, detail={}, created_at=utcnow())
    link = digest(str(head["last_hash"]), event, key=KEY)
    conn.execute(
        text(
            "INSERT INTO audit_events (kind, outcome, run_id, detail, created_at, prev_hash, hash)"
            " VALUES (:kind, 'info', :run, '{}', :at, :prev, :hash)"
        ),
        {
            "kind": kind,
            "run": run_id,
            "at": event.created_at,
            "prev": head["last_hash"],
            "hash": link,
        },
    )
    new_id = conn.execute(text("SELECT MAX(id) FROM audit_events")).scalar_one()
    head.update(event_count=int(str(head["event_count"])) + 1, last_event_id=new_id, last_hash=link)
    mac = _old_head_mac(KEY, head)
    conn.execute(
        text(
            "UPDATE audit_head SET event_count = :n, last_event_id = :i, last_hash = :h, mac = :m"
            " WHERE id = 1"
        ),
        {"n": head["event_count"], "i": new_id, "h": link, "m": mac},
    )
    return f"{head['event_count']}:{mac[:16]}"


def _old_unkeyed_log(url: str) -> tuple[Database, str]:
    """Three events written before the head existed, anchored by 0007; their last hash."""
    db = Database(url)
    _migrate_to(db, "0006")
    with db.engine.begin() as conn:
        prev = ""
        for n, kind in enumerate(("a", "b", "c")):
            prev = old_append(conn, kind, prev=prev, run_id=f"old-{n}")
    _migrate_to(db, "0007")
    return db, prev


def test_a_sealed_keyed_single_chain_log_becomes_shard_zero(store_url: str) -> None:
    old, _ = _old_unkeyed_log(store_url)
    with old.engine.begin() as conn:
        _old_seal(conn)
        kept = _old_keyed_append(conn, "d", run_id="old-3")
    old.dispose()
    for key in (None, INTRUDER_KEY):  # the new shards' heads need the log's own key
        other = Database(store_url, audit_key=key)
        with pytest.raises(Exception, match="audit log: "):
            upgrade(other.engine, audit_key=key)
        if key is not None:
            with pytest.raises(AuditChainError, match="another key"):
                prepare(other)  # refused before migrating, by the single head's MAC
        assert current_revision(other.engine) == "0007"
        other.dispose()

    db = Database(store_url, audit_key=KEY)
    prepare(db)
    report = check(db)
    assert report.intact and report.checked == 4 and report.sealed == 3
    assert report.fingerprint == kept  # what the operator kept before the upgrade
    x, y = runs_in_distinct_shards(2)
    append_for(db, x, "e", "f")
    append_for(db, y, "g")
    report = check(db)
    assert report.intact and report.checked == 7 and report.sealed == 3
    with db.transaction() as s:
        assert AuditRepository(s).verify(expect=Expected.parse(kept)).problem is None
        assert {
            e.shard for e in AuditRepository(s).iter_all() if e.kind in {"a", "b", "c", "d"}
        } == {0}
    db.dispose()


def test_an_unkeyed_single_chain_log_can_still_be_sealed_with_the_kept_values(
    store_url: str,
) -> None:
    old, last_hash = _old_unkeyed_log(store_url)
    old.dispose()
    db = Database(store_url)
    upgrade(db.engine)
    report = check(db)
    assert report.consistent and report.checked == 3 and not report.keyed
    assert report.last_hash == last_hash  # what `audit verify` printed before the upgrade
    db.dispose()
    keyed = Database(store_url, audit_key=KEY)
    with keyed.transaction() as s:
        AuditRepository(s).seal(events=3, last_hash=last_hash)
    append_for(keyed, runs_in_distinct_shards(1)[0], "d")
    report = check(keyed)
    assert report.intact and report.checked == 4 and report.sealed == 3
    keyed.dispose()


def test_a_log_still_in_shard_zero_goes_back_to_one_chain(store_url: str) -> None:
    db = Database(store_url, audit_key=KEY)
    upgrade(db.engine, audit_key=KEY)
    with db.transaction() as s:
        AuditRepository(s).record("no run", actor_id="U1")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
    with db.engine.connect() as conn:
        head = _old_head(conn)
    assert head["event_count"] == 1 and head["mac"] == _old_head_mac(KEY, head)
    prepare(db)  # and up again, keyed as it was
    assert check(db).intact and check(db).checked == 1
    append_for(db, runs_in_distinct_shards(1)[0], "spread")
    with pytest.raises(Exception, match="other shards"), db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
    db.dispose()
