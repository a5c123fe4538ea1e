"""A repeated approved call returns the first result instead of repeating its effect."""

from __future__ import annotations

from agent_runtime.idempotency import CONFIG_KEY, run_once
from agent_runtime.recording import operation_id
from store.db import Database
from store.ledger import EffectLedger
from store.migrate import upgrade


def test_run_once_per_key(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'l.db'}")
    upgrade(db.engine)
    ledger = EffectLedger(db)
    args = {"recipient": "a@example.com"}
    fingerprint = operation_id("run_1", "send", args)
    config = {"configurable": {"thread_id": "run_1", CONFIG_KEY: {fingerprint: "T:op:hash"}}}
    calls: list[int] = []

    def effect() -> str:
        calls.append(1)
        return f"sent #{len(calls)}"

    assert run_once(ledger, config, "send", args, effect) == "sent #1"
    assert run_once(ledger, config, "send", args, effect) == "sent #1"
    assert calls == [1]
    other = {"configurable": {"thread_id": "run_1"}}
    assert run_once(ledger, other, "send", args, effect) == "sent #2", "no key: no ledger"
