"""``audit export`` filtered as an auditor asks: by run, actor, tool and time, on both backends."""

from __future__ import annotations

import datetime as dt
import io
import json

from store.audit_export import ExportFilter, export
from store.repositories import AuditRepository
from tests.store.audit_env import open_store

T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def seeded(url: str, monkeypatch):  # type: ignore[no-untyped-def]
    """Four events, one an hour from T0."""
    hours = iter(range(4))
    monkeypatch.setattr("store.audit_log.utcnow", lambda: T0 + dt.timedelta(hours=next(hours)))
    db = open_store(url)
    with db.transaction() as s:
        audit = AuditRepository(s)
        audit.record("interrupt_recorded", run_id="r1", detail={"actions": [{"tool": "send"}]})
        audit.record("decision_recorded", run_id="r1", actor_id="U1", detail={"tool": "send"})
        audit.record("ungated_call_blocked", run_id="r2", detail={"tool": "delete"})
        audit.record("execution_paused", actor_id="cli:ops")
    return db


def kinds(db, only: ExportFilter) -> list[str]:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    with db.transaction() as s:
        export(s, out, only=only)
    return [json.loads(line)["kind"] for line in out.getvalue().splitlines()]


def test_each_filter_keeps_only_what_it_names(store_url, monkeypatch):
    db = seeded(store_url, monkeypatch)
    assert kinds(db, ExportFilter(run_id="r1")) == ["interrupt_recorded", "decision_recorded"]
    assert kinds(db, ExportFilter(actor_id="cli:ops")) == ["execution_paused"]
    assert kinds(db, ExportFilter(tool="send")) == ["interrupt_recorded", "decision_recorded"]
    assert kinds(db, ExportFilter(tool="delete")) == ["ungated_call_blocked"]
    window = ExportFilter(since=T0 + dt.timedelta(hours=1), until=T0 + dt.timedelta(hours=3))
    assert kinds(db, window) == ["decision_recorded", "ungated_call_blocked"]
    assert kinds(db, ExportFilter(run_id="r1", tool="delete")) == []
    assert len(kinds(db, ExportFilter())) == 4
    db.dispose()
