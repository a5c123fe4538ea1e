"""The audit log against someone with database access: each attack, and what shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text, update

from store.audit_chain import AuditChainError
from store.audit_models import AuditHead
from store.repositories import AuditRepository
from tests.store.audit_env import (
    INTRUDER_KEY,
    KEY,
    append,
    behind_the_triggers,
    check,
    event_id,
    open_store,
    recompute,
    relink,
)


@pytest.mark.parametrize("key", [KEY, None], ids=["keyed", "unkeyed"])
def test_removing_the_newest_events_behind_the_triggers_shows(
    store_url: str, key: bytes | None
) -> None:
    db = open_store(store_url, key)
    append(db, "a", "b", "c", "d", "e")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id > {event_id(conn, 3)}")
    report = check(db)
    assert report.problem is not None and not report.consistent
    assert report.problem.startswith("the newest 2 event(s) are missing")

    append(db, "f")  # the bot carries on: the gap stays visible in the next link
    report = check(db)
    assert report.problem is not None
    assert "(#4): its link to the previous event does not match" in report.problem
    db.dispose()


def test_the_owner_disabling_every_trigger_to_cut_the_tail_shows(pg_url: str) -> None:
    db = open_store(pg_url)
    append(db, "a", "b", "c")
    with db.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE audit_events DISABLE TRIGGER ALL")
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id = {event_id(conn, 3)}")
        conn.exec_driver_sql("ALTER TABLE audit_events ENABLE TRIGGER ALL")
    report = check(db)
    assert report.problem is not None and "newest 1 event(s) are missing" in report.problem
    db.dispose()


def test_emptying_the_log_shows(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql("DELETE FROM audit_events")
    report = check(db)
    assert report.problem is not None
    assert report.problem.startswith("the log is empty but the head records 2 events")
    db.dispose()


def test_the_head_cannot_be_removed_or_replaced(store_url: str) -> None:
    db = open_store(store_url)
    statements = ["DELETE FROM audit_head"]
    if db.is_sqlite:
        statements.append("INSERT OR REPLACE INTO audit_head SELECT * FROM audit_head")
    else:
        statements.append("TRUNCATE audit_head")
    for statement in statements:
        with pytest.raises(Exception, match="cannot be removed"), db.transaction() as s:
            s.execute(text(statement))
    db.dispose()


def test_a_removed_head_shows_and_stops_appends(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql("DELETE FROM audit_head")
    assert check(db).problem == "the head that anchors the log is missing (its row was removed)"
    with pytest.raises(AuditChainError, match="head that anchors the log is missing"):
        append(db, "b")
    db.dispose()


def test_a_rewrite_relinked_with_the_public_algorithm_shows(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b", "c", "d")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(
            f"UPDATE audit_events SET actor_id = 'U2' WHERE id = {event_id(conn, 2)}"
        )
        recompute(conn, key=None)
        # ... and keep the head keyed, as it was, but pointing at the new hashes
        conn.execute(update(AuditHead).values(keyed_from=1))
    report = check(db)
    assert report.problem == (
        "the head does not match AUDIT_KEY: it was altered, or written with another key"
    )
    with pytest.raises(AuditChainError, match="head does not match AUDIT_KEY"):
        append(db, "e")  # a forged head is never signed by the bot's next append
    db.dispose()


def test_a_relinked_rewrite_is_pinned_to_the_first_altered_event(store_url: str) -> None:
    """The head is left alone (it cannot be forged); each keyed link names where it broke."""
    db = open_store(store_url)
    append(db, "a", "b", "c", "d")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(
            f"UPDATE audit_events SET actor_id = 'U2' WHERE id = {event_id(conn, 2)}"
        )
        relink(conn, first=2, last=4)  # with the public algorithm, event 1 kept
        second = event_id(conn, 2)
    assert (
        check(db).problem == f"event {second} (#2) was altered: its content does not match its MAC"
    )
    db.dispose()


def test_a_rewrite_under_a_key_of_the_intruders_own_shows(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b", "c")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(
            f"UPDATE audit_events SET reason = 'forged' WHERE id = {event_id(conn, 2)}"
        )
        recompute(conn, key=INTRUDER_KEY)
    assert check(db).problem == (
        "the head does not match AUDIT_KEY: it was altered, or written with another key"
    )
    db.dispose()


def test_garbage_in_the_head_is_reported_not_a_crash(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a")
    with behind_the_triggers(db) as conn:
        conn.execute(update(AuditHead).values(mac="é" * 64))
    assert check(db).problem == (
        "the head does not match AUDIT_KEY: it was altered, or written with another key"
    )
    db.dispose()


def test_a_mangled_sqlite_value_is_reported_not_a_crash(tmp_path: Path) -> None:
    db = open_store(f"sqlite:///{tmp_path / 'audit.db'}")
    append(db, "a", "b")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql("UPDATE audit_events SET detail = '{not json' WHERE id = 2")
    assert check(db).problem == "an event from #1 on cannot be read: a value was mangled"
    db.dispose()


def test_an_altered_event_is_named_even_under_a_good_head(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b", "c")
    with behind_the_triggers(db) as conn:  # the links are left alone: only content changes
        second = event_id(conn, 2)
        conn.exec_driver_sql(f"UPDATE audit_events SET actor_id = 'U2' WHERE id = {second}")
    assert (
        check(db).problem == f"event {second} (#2) was altered: its content does not match its MAC"
    )
    db.dispose()


def test_a_downgrade_to_an_unkeyed_log_shows_and_stops_the_bot(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b", "c")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql("UPDATE audit_events SET actor_id = 'U2' WHERE id = 1")
        recompute(conn, key=None)
    report = check(db)
    assert report.unsealed and not report.intact
    with pytest.raises(AuditChainError, match="not keyed"):
        append(db, "d")
    with pytest.raises(AuditChainError, match="not keyed"), db.transaction() as s:
        AuditRepository(s).check_key()
    db.dispose()


def test_a_downgrade_that_leaves_the_heads_mac_is_named(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql("UPDATE audit_events SET actor_id = 'U2' WHERE id = 1")
        recompute(conn, key=None)
        conn.execute(update(AuditHead).values(mac="f" * 64))
    assert (
        check(db).problem == "the head carries a MAC but no key fields: a keyed log was rewritten"
    )
    db.dispose()


def test_a_recomputed_newest_event_of_an_unkeyed_log_does_not_match_its_head(
    store_url: str,
) -> None:
    """The links before it still hold; only the head's newest hash shows the change."""
    db = open_store(store_url, key=None)
    append(db, "a", "b", "c")
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(
            f"UPDATE audit_events SET actor_id = 'U2' WHERE id = {event_id(conn, 3)}"
        )
        relink(conn, first=3, last=3)
        third = event_id(conn, 3)
    assert check(db).problem == (
        f"the newest event, {third}, does not match the head: the head records 3 events ending "
        f"at event {third}"
    )
    db.dispose()
