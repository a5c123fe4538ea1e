"""Stores at the newest revision for tests that do not test the migrations (migrating a new
store costs more than most tests it serves): each SQLite store a copy of one migrated once per
test process, each PostgreSQL database a copy of a template database migrated once per test
process. Tests of the migrations themselves, and of what a new store gets, start from empty
stores. The copies' audit logs are unkeyed, so a bot started on one with AUDIT_KEY refuses it."""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

import psycopg

from store.db import Database
from store.migrate import upgrade

_migrated: list[Path] = []


def _template() -> Path:
    if not _migrated:
        folder = tempfile.mkdtemp(prefix="approval-migrated-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # one per test process
        path = Path(folder) / "template.db"
        db = Database(f"sqlite:///{path}")
        upgrade(db.engine)
        db.dispose()
        _migrated.append(path)
    return _migrated[0]


def migrated_sqlite_url(path: Path) -> str:
    """The URL of a new store at ``path``, copied from the migrated one (SQLite's backup API:
    a consistent copy whatever its journal mode)."""
    with sqlite3.connect(_template()) as source, sqlite3.connect(path) as target:
        source.backup(target)
    source.close()
    target.close()
    return f"sqlite:///{path}"


def database_url(admin_url: str, name: str) -> str:
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def create_database(admin_url: str, *, template: str | None = None) -> str:
    """A new database's name: empty (a copy of ``template1``), or a copy of ``template``,
    which nobody may be connected to meanwhile (PostgreSQL refuses the copy then)."""
    name = f"approval_test_{uuid.uuid4().hex[:12]}"
    copied = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copied}')
    return name


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated_pg_template(admin_url: str) -> str:
    """A new database at the newest revision, every connection to it closed, to be copied."""
    name = create_database(admin_url)
    db = Database(database_url(admin_url, name))
    upgrade(db.engine)
    db.dispose()
    return name
