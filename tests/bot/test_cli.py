"""The command line as operators use it."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bot.cli import main
from bot.demo import run_demo


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
    assert "store at revision 0001; checkpointer tables ready" in capsys.readouterr().out


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
