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
    home = text.split("opens the approval-bot Home tab", 1)[1].split("clicks [Approve]", 1)[0]
    assert "== Waiting on you ==" in home and "`delete_project_file`" in home
    assert "== Your runs ==" in home and "== Recently decided by you ==" in home


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


AUDIT_KEY = "an AUDIT_KEY for the command line tests"


def _record(url: str, *kinds: str, key: str | None = AUDIT_KEY) -> None:
    from store.db import Database
    from store.repositories import AuditRepository

    db = Database(url, audit_key=key.encode() if key else None)
    for kind in kinds:
        with db.transaction() as s:
            AuditRepository(s).record(kind, actor_id="U1", detail={"k": kind})
    db.dispose()


def test_audit_verify_names_the_first_changed_event(database, monkeypatch, capsys):
    from sqlalchemy import text

    from store.db import Database

    monkeypatch.setenv("AUDIT_KEY", AUDIT_KEY)
    main(["db", "upgrade"])
    _record(database, "run_started", "interrupt_recorded", "decision_recorded", "resumed")
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.startswith("audit log intact: 4 events, keyed (head ")

    db = Database(database)
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
        "audit log not intact: event 3 (#3) was altered: its content does not match its MAC"
    )


def test_audit_verify_notices_a_deleted_event(database, monkeypatch, capsys):
    from store.db import Database

    monkeypatch.setenv("AUDIT_KEY", AUDIT_KEY)
    main(["db", "upgrade"])
    _record(database, "a", "b", "c")
    db = Database(database)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER audit_events_no_delete")
        conn.exec_driver_sql("DELETE FROM audit_events WHERE id = 2")
    db.dispose()
    capsys.readouterr()
    assert main(["audit", "verify"]) == 1
    assert "not intact: event 3 (#2): its link" in capsys.readouterr().out


def test_audit_verify_says_plainly_that_a_log_without_a_key_is_unkeyed(database, capsys):
    main(["db", "upgrade"])
    _record(database, "a", "b", key=None)
    capsys.readouterr()
    assert main(["audit", "verify"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("audit log unkeyed: 2 events link up, but AUDIT_KEY is not set")
    assert "intact" not in out


def test_a_key_introduced_on_an_existing_log_needs_a_seal(database, monkeypatch, capsys):
    """The README's steps, as written: verify without the key, set it, verify (unsealed), seal
    with the values printed first, verify (intact, with a fingerprint to keep)."""
    main(["db", "upgrade"])
    _record(database, "a", "b", key=None)
    capsys.readouterr()
    assert main(["audit", "verify"]) == 3
    out = capsys.readouterr().out
    kept = out.split("keep: ")[1].split()
    assert kept[:2] == ["--events", "2"] and kept[2] == "--last-hash" and len(kept[3]) == 64
    monkeypatch.setenv("AUDIT_KEY", AUDIT_KEY)
    assert main(["audit", "verify"]) == 4
    out = capsys.readouterr().out
    assert out.startswith("audit log unsealed: 2 events link up, but AUDIT_KEY is set")
    assert "audit seal --events N --last-hash H" in out and kept[3] not in out

    assert main(["audit", "seal", "--events", "2", "--last-hash", "0" * 64]) == 2
    assert "not the log you vouch for" in capsys.readouterr().err
    assert main(["audit", "seal", *kept]) == 0
    assert capsys.readouterr().out.startswith(
        f"audit log sealed: you vouched for 2 events ending at {kept[3]}"
    )
    _record(database, "c")
    assert main(["audit", "verify"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "audit log intact: 3 events, keyed; the first 2, written before AUDIT_KEY was set, "
        "are sealed by it (head 3:"
    )
    fingerprint = out.split("(head ")[1].split(";")[0]
    assert main(["audit", "verify", "--expect", fingerprint]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", "--expect", "4:" + fingerprint.split(":")[1]]) == 1
    assert "newer events were removed" in capsys.readouterr().out
    assert main(["audit", "verify", "--expect", "three"]) == 2
    assert main(["audit", "seal", *kept]) == 0
    assert "already sealed" in capsys.readouterr().out

    monkeypatch.setenv("AUDIT_KEY", "x" * 40)  # another key
    assert main(["audit", "verify"]) == 1
    assert "head does not match AUDIT_KEY" in capsys.readouterr().out


def test_audit_commands_do_not_create_a_mistyped_sqlite_file(monkeypatch, tmp_path, capsys):
    missing = tmp_path / "typo.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{missing}")
    for command in (["audit", "verify"], ["audit", "export"], ["db", "prune"]):
        assert main(command) == 2
        assert "there is no SQLite database at" in capsys.readouterr().err
    assert not missing.exists()
    assert main(["db", "upgrade"]) == 0
    assert missing.exists()


def test_audit_verify_catches_the_owner_cutting_the_tail_on_postgresql(
    pg_url, monkeypatch, tmp_path, capsys
):
    import psycopg

    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("AUDIT_KEY", AUDIT_KEY)
    monkeypatch.chdir(tmp_path)
    main(["db", "upgrade"])
    _record(pg_url, "a", "b", "c")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("TRUNCATE audit_events")
        conn.execute("SET session_replication_role = replica")
        ids = [row[0] for row in conn.execute("SELECT id FROM audit_events ORDER BY id")]
        conn.execute("DELETE FROM audit_events WHERE id = %s", (ids[-1],))
    capsys.readouterr()
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.strip() == (
        "audit log not intact: the newest 1 event(s) are missing: the head records 3 events "
        f"ending at event {ids[2]}, the log ends at event {ids[1]} (#2)"
    )


def test_the_bot_will_not_start_with_another_audit_key(serve_bot, new_sqlite_url):
    from store.audit_chain import AuditChainError

    serve_bot(new_sqlite_url, audit_key=AUDIT_KEY)  # a new store is keyed from its first event
    with pytest.raises(AuditChainError, match="head does not match AUDIT_KEY"):
        serve_bot(new_sqlite_url, audit_key="y" * 40)
    with pytest.raises(AuditChainError, match="the log is keyed: set AUDIT_KEY"):
        serve_bot(new_sqlite_url)


def test_a_bot_with_a_key_will_not_start_on_an_unkeyed_log(serve_bot, sqlite_url):
    from store.audit_chain import AuditChainError

    serve_bot(sqlite_url)
    with pytest.raises(AuditChainError, match="AUDIT_KEY is set but the log's head is not keyed"):
        serve_bot(sqlite_url, audit_key=AUDIT_KEY)


UNUSABLE = {
    "garbage": ("not-a-url", "DATABASE_URL: not a database URL"),
    "scheme": ("mysql://db/x", "DATABASE_URL: unsupported database 'mysql'"),
    "unreachable": ("postgresql://127.0.0.1:1/x", "DATABASE_URL: cannot use postgresql://"),
    "bad_path": ("sqlite:///{tmp}/no/such/folder/x.db", "DATABASE_URL: cannot use sqlite://"),
}


@pytest.mark.parametrize("command", [["db", "upgrade"], ["serve"], ["audit", "verify"]])
@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_an_unusable_database_url_is_one_line(case, command, monkeypatch, tmp_path, capsys):
    url, message = UNUSABLE[case]
    monkeypatch.setenv("DATABASE_URL", url.format(tmp=tmp_path))
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:1/")  # Slack is not what is wrong
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"approval-bot: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_unreachable_database_is_one_line_from_the_installed_command(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "DATABASE_URL": "postgresql://127.0.0.1:1/x"}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "db", "upgrade"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("approval-bot: DATABASE_URL: cannot use postgresql://127.0.0.1:1")
    assert done.stderr.count("\n") == 1, done.stderr


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


def test_an_admin_port_in_use_is_one_line_and_no_bot_is_left_running(tmp_path):
    import socket
    import subprocess
    import sys

    from bot.sandbox import people
    from bot.sandbox.process import bot_env
    from bot.sandbox.server import SlackSandbox

    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    env = bot_env(
        sandbox,
        f"sqlite:///{tmp_path / 'bot.db'}",
        tmp_path / "workspace",
        ADMIN_HOST="127.0.0.1",
        ADMIN_PORT=str(port),
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "serve", "--port", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        taken.close()
        sandbox.stop()
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"approval-bot: ADMIN_PORT: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in done.stderr


def test_pause_and_resume_from_the_command_line_are_audited_under_the_operator(
    database, capsys, monkeypatch
):
    from sqlalchemy import select

    from store.audit_models import AuditEvent
    from store.db import Database
    from store.switch import SwitchRepository

    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.setattr("getpass.getuser", lambda: "oncall")
    main(["db", "upgrade"])
    capsys.readouterr()
    assert main(["pause", "--reason", "incident 42"]) == 0
    assert "approval-bot resume" in capsys.readouterr().out
    assert main(["pause"]) == 1  # already paused: nothing changed, said so
    assert "already paused" in capsys.readouterr().out
    db = Database(database)
    with db.transaction() as s:
        state = SwitchRepository(s).state()
        assert (state.paused, state.changed_by, state.reason) == (True, "cli:oncall", "incident 42")
    assert main(["resume"]) == 0
    with db.transaction() as s:
        assert not SwitchRepository(s).state().paused
        kinds = s.scalars(select(AuditEvent.kind).where(AuditEvent.actor_id == "cli:oncall"))
        assert list(kinds) == ["execution_paused", "execution_resumed"]
    db.dispose()
