"""The effects ledger: a tool that sees an idempotency key again returns the stored result
instead of repeating its effect (a crash between the effect and the checkpoint write would
otherwise repeat it on recovery)."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from store.db import Database
from store.models import ToolEffect, utcnow


class EffectLedger:
    def __init__(self, db: Database) -> None:
        self.db = db

    def result_of(self, key: str) -> str | None:
        with self.db.transaction() as s:
            row = s.get(ToolEffect, key)
            return row.result if row else None

    def remember(self, key: str, *, tool: str, result: str) -> str:
        """Store the result; if another process stored one first, that one wins."""
        try:
            with self.db.transaction() as s:
                s.add(ToolEffect(key=key, tool=tool, result=result, created_at=utcnow()))
        except IntegrityError:
            stored = self.result_of(key)
            return stored if stored is not None else result
        return result
