"""Keying the audit log: a new store keyed from the start, an old log sealed once, and a
bot that will not run with a key that does not fit."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config

from store.audit_chain import AuditChainError
from store.db import Database
from store.migrate import MIGRATIONS, current_revision, prepare, upgrade
from store.repositories import AuditRepository
from tests.store.audit_env import (
    INTRUDER_KEY,
    KEY,
    append,
    behind_the_triggers,
    check,
    event_id,
    old_append,
    open_store,
    recompute,
    relink,
)


def test_an_untouched_keyed_log_is_intact(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b", "c")
    report = check(db)
    assert report.intact and report.checked == 3 and report.sealed == 0
    assert report.fingerprint
    db.dispose()


def test_a_keyed_log_refuses_a_missing_or_other_key(store_url: str) -> None:
    open_store(store_url).dispose()
    for key, message in ((None, "the log is keyed: set AUDIT_KEY"), (INTRUDER_KEY, "another key")):
        db = Database(store_url, audit_key=key)
        with pytest.raises(AuditChainError, match=message), db.transaction() as s:
            AuditRepository(s).check_key()
        with pytest.raises(AuditChainError, match=message):
            append(db, "x")
        db.dispose()


def test_an_unkeyed_log_links_up_but_is_not_called_intact(store_url: str) -> None:
    db = open_store(store_url, key=None)
    append(db, "a", "b")
    report = check(db)
    assert report.consistent and not report.keyed and not report.intact
    assert report.checked == 2
    db.dispose()


def test_a_key_introduced_later_seals_the_earlier_events(store_url: str) -> None:
    open_store(store_url, key=None).dispose()
    before = Database(store_url)
    append(before, "a", "b", "c")
    kept = check(before)  # what `audit verify` printed before the key existed
    before.dispose()
    db = Database(store_url, audit_key=KEY)
    assert check(db).unsealed and not check(db).intact
    with pytest.raises(AuditChainError, match="not keyed"), db.transaction() as s:
        AuditRepository(s).check_key()  # the bot will not start until the operator seals
    with db.transaction() as s:
        seal = AuditRepository(s).seal(events=3, last_hash=kept.last_hash)
    assert (seal.events, seal.already, seal.last_hash) == (3, False, kept.last_hash)
    append(db, "d", "e")
    report = check(db)
    assert report.intact and report.checked == 5 and report.sealed == 3
    with db.transaction() as s:
        assert AuditRepository(s).seal(events=3, last_hash=kept.last_hash).already

    with behind_the_triggers(db) as conn:  # rewrite a sealed event and relink the unkeyed part
        changed, fourth = event_id(conn, 2), event_id(conn, 4)
        conn.exec_driver_sql(f"UPDATE audit_events SET actor_id = 'U2' WHERE id = {changed}")
        relink(conn, first=2, last=3)
    report = check(db)
    assert report.problem is not None
    assert report.problem.startswith(
        f"event {fourth} (#4): its link to the previous event does not match"
    )
    db.dispose()


def test_seal_refuses_a_log_that_does_not_check_out(store_url: str) -> None:
    open_store(store_url, key=None).dispose()
    before = Database(store_url)
    append(before, "a", "b")
    with behind_the_triggers(before) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id = {event_id(conn, 2)}")
    before.dispose()
    db = Database(store_url, audit_key=KEY)
    refused = pytest.raises(AuditChainError, match="not sealing it: the newest 1 event")
    with refused, db.transaction() as s:
        AuditRepository(s).seal(events=1, last_hash="")
    db.dispose()


def test_seal_vouches_only_for_the_log_the_operator_checked(store_url: str) -> None:
    """Nothing in the database tells a never-keyed log from a keyed one rewritten without the
    key, so sealing takes the count and last hash printed before the key existed."""
    open_store(store_url, key=None).dispose()
    before = Database(store_url)
    append(before, "a", "b")
    kept = check(before)
    append(before, "c")  # written after the operator's check: not what they vouch for
    before.dispose()
    db = Database(store_url, audit_key=KEY)
    for events, last_hash in ((2, kept.last_hash), (3, kept.last_hash), (3, "0" * 64)):
        refused = pytest.raises(AuditChainError, match="not the log you vouch for")
        with refused, db.transaction() as s:
            AuditRepository(s).seal(events=events, last_hash=last_hash)
    assert check(db).unsealed
    db.dispose()


def test_a_rewritten_keyed_log_cannot_be_sealed_with_the_kept_values(store_url: str) -> None:
    """The intruder without the key rewrites a keyed log as plain SHA-256 and clears the head's
    key fields; start-up does not advise sealing, and the seal refuses the operator's values."""
    open_store(store_url, key=None).dispose()
    before = Database(store_url)
    append(before, "a", "b")
    kept = check(before)
    before.dispose()
    db = Database(store_url, audit_key=KEY)
    with db.transaction() as s:
        AuditRepository(s).seal(events=2, last_hash=kept.last_hash)
    append(db, "c", "d")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(
            f"UPDATE audit_events SET actor_id = 'U2' WHERE id = {event_id(conn, 3)}"
        )
        recompute(conn, key=None)
    with pytest.raises(AuditChainError) as refused, db.transaction() as s:
        AuditRepository(s).check_key()
    assert "seal" not in str(refused.value) and "rewritten without the key" in str(refused.value)
    refused_seal = pytest.raises(AuditChainError, match="not the log you vouch for")
    with refused_seal, db.transaction() as s:
        AuditRepository(s).seal(events=2, last_hash=kept.last_hash)
    assert not check(db).intact
    db.dispose()


def test_a_wrong_key_is_refused_before_the_schema_changes(store_url: str) -> None:
    """Start-up checks the key against an existing log before migrating it."""
    db = open_store(store_url)
    append(db, "a")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.stamp(config, "0006")  # as if a newer release brought a migration
    db.dispose()
    wrong = Database(store_url, audit_key=INTRUDER_KEY)
    with pytest.raises(AuditChainError, match="another key"):
        prepare(wrong)
    assert current_revision(wrong.engine) == "0006"
    wrong.dispose()


def test_an_existing_log_is_anchored_by_the_upgrade(store_url: str) -> None:
    """A store written before the head existed: the upgrade anchors the log as it stands."""
    db = Database(store_url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0006")
        prev = ""
        for kind in ("a", "b", "c"):
            prev = old_append(conn, kind, prev=prev)
    upgrade(db.engine, audit_key=KEY)  # an existing store is not keyed by the upgrade
    report = check(db)
    assert report.consistent and report.checked == 3 and not report.keyed
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id = {event_id(conn, 3)}")
    assert (check(db).problem or "").startswith("the newest 1 event(s) are missing")
    db.dispose()
