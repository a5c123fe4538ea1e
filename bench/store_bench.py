"""Store scale: 100k historical approval requests and 1M audit events on PostgreSQL; the latency
of listing one reviewer's pending approvals, of recording a decision, and of audit export."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from agent_runtime import decisions
from agent_runtime.agents.workspace import Workspace
from agent_runtime.authorization import Actor
from agent_runtime.engine import ApprovalEngine
from agent_runtime.graph_runtime import close_checkpointer, open_runtime
from agent_runtime.notifier import NullNotifier
from agent_runtime.policy import load_policy
from bench.common import fresh_database, ms, table
from store import pending_slots
from store.audit_export import export
from store.db import Database
from store.migrate import upgrade

POLICY_VERSION = load_policy(None).version  # the version the engine decides under
SEEDED_HASH = "h" * 64
REQUESTS, PENDING, AUDIT = 100_000, 1_000, 1_000_000


def _load(db: Database) -> list[str]:
    """Bulk-load history with COPY; returns the ids of pending actions needing 2 approvals."""
    now = dt.datetime.now(dt.UTC)
    pending_actions = []
    raw = db.engine.raw_connection()
    try:
        cur = raw.cursor()
        with cur.copy(
            "COPY runs (id, requester_id, channel_id, request_text, status, "
            "created_at, updated_at, result_posted) FROM STDIN"
        ) as copy:
            for i in range(REQUESTS):
                copy.write_row(
                    (f"run_{i}", "U0ALICE", "C1", "history", "completed", now, now, True)
                )
        with cur.copy(
            "COPY approval_requests (id, run_id, interrupt_id, kind, status, "
            "policy_version, requester_id, expires_at, created_at) FROM STDIN"
        ) as copy:
            for i in range(REQUESTS):
                status = "pending" if i >= REQUESTS - PENDING else "resolved"
                copy.write_row(
                    (
                        f"apr_{i}",
                        f"run_{i}",
                        f"i{i}",
                        "hitl_batch",
                        status,
                        POLICY_VERSION,
                        "U0ALICE",
                        now + dt.timedelta(hours=4, seconds=i),  # distinct: a stable order
                        now,
                    )
                )
        with cur.copy(
            "COPY actions (id, request_id, position, tool_name, args, description, "
            "allowed_decisions, approver_roles, approvals_required, self_approval, "
            "risk, action_hash, operation_id, exempt, outcome) FROM STDIN"
        ) as copy:
            for i in range(REQUESTS):
                role = "release-managers" if i % 2 else "security"
                action_id = f"act_{uuid.UUID(int=i).hex}"
                if i >= REQUESTS - PENDING:
                    pending_actions.append(action_id)
                copy.write_row(
                    (
                        action_id,
                        f"apr_{i}",
                        0,
                        "publish_report",
                        json.dumps({"path": f"r{i}.md"}),
                        "",
                        '["approve", "reject"]',
                        json.dumps([role]),
                        2,
                        False,
                        "high",
                        SEEDED_HASH,
                        f"op_{i}",
                        False,
                        None if i >= REQUESTS - PENDING else "approved",
                    )
                )
        with cur.copy(
            "COPY decisions (id, action_id, request_id, reviewer_id, type, action_hash, "
            "created_at) FROM STDIN"
        ) as copy:
            for i in range(REQUESTS - PENDING):  # history: each decided by one of the listers
                reviewer = LISTERS[i % 3]
                action_id = f"act_{uuid.UUID(int=i).hex}"
                copy.write_row(
                    (f"dec_{i}", action_id, f"apr_{i}", reviewer, "approve", SEEDED_HASH, now)
                )
        with cur.copy(
            "COPY audit_events (created_at, kind, outcome, actor_id, run_id, "
            "request_id, detail, prev_hash, hash) FROM STDIN"
        ) as copy:
            for i in range(AUDIT):
                copy.write_row(
                    (
                        now,
                        "decision_recorded",
                        "allowed",
                        "U0REL1",
                        f"run_{i % REQUESTS}",
                        f"apr_{i % REQUESTS}",
                        '{"decision": "approve"}',
                        "",
                        "x" * 64,
                    )
                )
        raw.commit()
    finally:
        raw.close()
    return pending_actions


LISTERS = ("U0REL1", "U0REL2", "U0SEC1", "U0ALICE")  # two roles, and the requester


def _list_pending(engine: ApprovalEngine, *, rounds: int = 15) -> tuple[list[float], str]:
    """Seconds per listing, after one warm-up round; and what each reviewer saw (count:digest,
    to compare one implementation's answers with another's)."""
    seen: dict[str, str] = {}
    for user in LISTERS:
        ids = [v.id for v in engine.pending_for(Actor(user, None))]
        digest = hashlib.sha256(",".join(ids).encode()).hexdigest()[:8]
        seen[user] = f"{len(ids)}:{digest}"
    timings = []
    for _ in range(rounds):
        for user in LISTERS:
            start = time.perf_counter()
            engine.pending_for(Actor(user, None))
            timings.append(time.perf_counter() - start)
    return timings, " ".join(f"{u}={v}" for u, v in seen.items())


def run_all() -> list[str]:
    with fresh_database() as url, tempfile.TemporaryDirectory() as folder:
        db = Database(url)
        upgrade(db.engine)
        started = time.perf_counter()
        pending = _load(db)
        with db.transaction() as session:
            pending_slots.rebuild(session)  # COPY bypasses the store, as a restore would
        # Like a restore, followed by VACUUM ANALYZE: planner statistics, and the visibility
        # map that index-only scans need; and no autovacuum of a million fresh rows competing
        # with the timings below for the two cores.
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
        loaded = time.perf_counter() - started
        runtime = open_runtime(
            database_url=url,
            agent="bench.slow_graph:build_graph",
            model="offline",
            policy=load_policy(None),
            workspace=Workspace(Path(folder)).ensure(),
        )
        engine = ApprovalEngine(
            db=db, runtime=runtime, policy=load_policy(None), notifier=NullNotifier()
        )
        listing, listed = _list_pending(engine)
        reviewer = Actor("U0REL1", None)
        recording = []
        for action_id in pending[1::2][:20]:  # release-managers actions: U0REL1 may approve
            start = time.perf_counter()
            result = engine.decisions.record(
                action_id=action_id,
                attempt=decisions.Attempt(
                    actor=reviewer, decision="approve", seen_hash=SEEDED_HASH
                ),
            )
            recording.append(time.perf_counter() - start)
            assert result.refusal is None and not result.completed
        start = time.perf_counter()
        with db.transaction() as session:
            exported = export(session, io.StringIO(), fmt="jsonl")
        export_s = time.perf_counter() - start
        close_checkpointer(runtime.checkpointer)
        db.dispose()
    cuts = statistics.quantiles(listing, n=20)
    p50, p95 = cuts[9], cuts[18]
    rows = [
        (
            "list one reviewer's pending approvals (50 shown), p50",
            ms(p50),
            f"{len(listing)} listings over {len(LISTERS)} reviewers",
        ),
        ("list one reviewer's pending approvals, p95", ms(p95), listed),
        (
            "record a decision (authorize, append, audit)",
            ms(statistics.median(recording)),
            f"median of {len(recording)}",
        ),
        (
            "audit export, jsonl",
            f"{export_s * 1000:.0f}",
            f"{exported} events, {exported / export_s:,.0f} events/s",
        ),
    ]
    return [
        table(
            f"Store scale: {REQUESTS:,} approval requests ({PENDING} pending), "
            f"{AUDIT:,} audit events, PostgreSQL (loaded in {loaded:.0f} s)",
            ["operation", "ms", "notes"],
            rows,
        )
    ]


if __name__ == "__main__":
    print(*run_all(), sep="\n")
