"""The command line as operators use it."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bot.cli import main
from bot.demo import run_demo
from store.migrate import head_revision


def test_demo_walks_through_and_succeeds():
    out = io.StringIO()
    assert run_demo(out) == 0
    text = out.getvalue()
    assert "can't approve its actions yourself" in text
    assert "We still need these notes for the audit." in text
    assert "Side effects that ran: send_external_message" in text
    assert "decision_refused" in text and "resumed" in text


@pytest.fixture
def database(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.chdir(tmp_path)
    return url


def test_db_upgrade_is_idempotent(database, capsys):
    assert main(["db", "upgrade"]) == 0
    assert main(["db", "upgrade"]) == 0
    expected = f"store at revision {head_revision()}; checkpointer tables ready"
    assert expected in capsys.readouterr().out


def test_audit_export_jsonl_and_csv(database, capsys):
    from store.db import Database
    from store.repositories import AuditRepository

    main(["db", "upgrade"])
    db = Database(database)
    with db.transaction() as s:
        AuditRepository(s).record("run_started", actor_id="U1", detail={"text": 'a,b\n"c"'})
    db.dispose()
    capsys.readouterr()

    assert main(["audit", "export", "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["kind"], r["actor_id"], r["detail"]["text"]) for r in rows] == [
        ("run_started", "U1", 'a,b\n"c"')
    ]
    assert main(["audit", "export", "--format", "csv"]) == 0
    parsed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert json.loads(parsed[0]["detail"]) == {"text": 'a,b\n"c"'}


def test_audit_verify_names_the_first_changed_event(database, capsys):
    from sqlalchemy import text

    from store.db import Database
    from store.repositories import AuditRepository

    main(["db", "upgrade"])
    db = Database(database)
    for kind in ("run_started", "interrupt_recorded", "decision_recorded", "resumed"):
        with db.transaction() as s:
            AuditRepository(s).record(kind, actor_id="U1", detail={"k": kind})
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.strip() == "audit log intact: 4 events"

    with db.transaction() as s:
        refused = None
        try:
            s.execute(text("UPDATE audit_events SET actor_id = 'U2' WHERE id = 3"))
        except Exception as exc:  # the store refuses changes to the audit log
            refused = exc
    assert refused is not None and "append-only" in str(refused)

    with db.engine.begin() as conn:  # someone with direct database access removes the guard
        conn.exec_driver_sql("DROP TRIGGER audit_events_no_update")
        conn.exec_driver_sql("UPDATE audit_events SET actor_id = 'U2' WHERE id = 3")
    db.dispose()
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.strip() == (
        "audit log broken at event 3: its content does not match its hash"
    )


def test_audit_verify_notices_a_deleted_event(database, capsys):
    from store.db import Database
    from store.repositories import AuditRepository

    main(["db", "upgrade"])
    db = Database(database)
    for kind in ("a", "b", "c"):
        with db.transaction() as s:
            AuditRepository(s).record(kind)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER audit_events_no_delete")
        conn.exec_driver_sql("DELETE FROM audit_events WHERE id = 2")
    db.dispose()
    capsys.readouterr()
    assert main(["audit", "verify"]) == 1
    assert "broken at event 3: its link" in capsys.readouterr().out


def test_db_upgrade_run_three_times_at_once_on_postgresql(pg_url, tmp_path):
    """Replicas start together, and each runs the upgrade: they take turns, none crashes."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DATABASE_URL": pg_url}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bot", "db", "upgrade"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert [code for code, _out, _err in results] == [0, 0, 0], [e for _c, _o, e in results]
    assert all("checkpointer tables ready" in out for _code, out, _err in results)
