"""The ways a savepoint ends without being released, for tests of what follows savepoints."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from store.audit_models import AuditHead

UNDOINGS = ("rolled back", "a flush fails in it", "closed without release")
"""SQLAlchemy announces only the first as the savepoint's rollback: a failed flush announces
its own subtransaction's, and ``close()`` none."""


def undone(s: Session, how: str, body: Callable[[], None]) -> None:
    """Run ``body`` in a savepoint, then end the savepoint ``how`` (one of ``UNDOINGS``)."""
    if how == "a flush fails in it":
        with pytest.raises(IntegrityError), s.begin_nested():
            body()
            s.add(AuditHead(id=0))  # a head that exists: the flush fails
            s.flush()
        return
    savepoint = s.begin_nested()
    body()
    if how == "rolled back":
        savepoint.rollback()
    else:
        savepoint.close()
