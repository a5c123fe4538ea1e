"""SQLite stores at the newest revision for tests that do not test the migrations: each a copy
of one store migrated once per test process (migrating a new store costs more than most tests
it serves). Tests of the migrations themselves start from empty stores."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from store.db import Database
from store.migrate import upgrade

_migrated: list[Path] = []


def _template() -> Path:
    if not _migrated:
        path = Path(tempfile.mkdtemp(prefix="approval-migrated-")) / "template.db"
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
