"""An older copy of the audit head put back after deleting newer events: a MAC cannot show it,
a fingerprint kept elsewhere (``--expect``) and the running bot's memory do."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from store.audit_chain import AuditRollbackError, Expected
from store.audit_models import AuditHead
from store.db import Database
from store.repositories import AuditRepository
from tests.store.audit_env import KEY, append, behind_the_triggers, check, event_id, open_store


def _verify(db: Database, expect: str) -> str | None:
    with db.transaction() as s:
        return AuditRepository(s).verify(expect=Expected.parse(expect)).problem


def test_a_restored_older_head_is_caught_by_the_kept_fingerprint(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a", "b")
    early = check(db).fingerprint
    with db.engine.connect() as conn:
        copy = dict(
            conn.execute(select(AuditHead.__table__).where(AuditHead.id == 0)).mappings().one()
        )
    append(db, "c", "d", "e")
    kept = check(db).fingerprint
    assert kept.startswith("5:") and _verify(db, kept) is None and _verify(db, early) is None

    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql(f"DELETE FROM audit_events WHERE id > {event_id(conn, 2)}")
        conn.execute(update(AuditHead).where(AuditHead.id == 0).values(**copy))
    assert check(db).intact  # the MACs all hold: only something kept outside can tell
    assert _verify(db, kept) == (
        f"the log has 2 events but had at least 5 when {kept} was printed: "
        "newer events were removed"
    )
    assert _verify(db, early) is None
    assert "is not the one you kept" in (_verify(db, "2:" + "0" * 16) or "")
    db.dispose()


def test_the_running_bot_refuses_a_head_that_went_backwards(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a")
    with db.engine.connect() as conn:
        copy = dict(
            conn.execute(select(AuditHead.__table__).where(AuditHead.id == 0)).mappings().one()
        )
    append(db, "b")  # one append, then the older copy is restored
    with behind_the_triggers(db) as conn:
        conn.exec_driver_sql("DELETE FROM audit_events WHERE id > 1")
        conn.execute(update(AuditHead).where(AuditHead.id == 0).values(**copy))
    with pytest.raises(AuditRollbackError, match="records 1 events but this process already saw 2"):
        append(db, "c")
    with pytest.raises(AuditRollbackError), db.transaction() as s:
        AuditRepository(s).check_key()
    db.dispose()


def test_a_rolled_back_append_does_not_raise_the_mark(store_url: str) -> None:
    db = open_store(store_url)
    append(db, "a")
    with pytest.raises(RuntimeError), db.transaction() as s:
        AuditRepository(s).record("b")
        raise RuntimeError("the unit of work failed after the audit append")
    append(db, "c")  # the head is at 1, as committed: nothing went backwards
    assert check(db).intact and check(db).checked == 2
    db.dispose()


@pytest.mark.parametrize("text", ["\ud800", "a\udc00b", "\ud83d\ude00\ud83d", "nul\x00"])
def test_any_python_string_can_be_audited_and_verifies(store_url: str, text: str) -> None:
    """Tool results reach ``detail``: a lone surrogate must not fail the append after a tool
    ran; it is stored as U+FFFD, the value that was hashed."""
    db = open_store(store_url, key=KEY)
    with db.transaction() as s:
        AuditRepository(s).record(
            "tool_result", actor_id=text, reason=text, detail={text: [text, {"k": text}]}
        )
    report = check(db)
    assert report.intact and report.checked == 1
    with db.transaction() as s:
        (event,) = AuditRepository(s).iter_all()
        stored = (event.reason, event.actor_id, event.detail)
    stored_text = str(stored)
    assert "\ufffd" in stored_text or "\U0001f600" in stored_text
    stored_text.encode("utf-8")  # nothing unencodable was kept
    assert "\x00" not in stored_text
    db.dispose()
