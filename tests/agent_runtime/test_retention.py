"""Pruning deletes finished runs' checkpoints and keeps runs, decisions and the audit chain."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update

from agent_runtime.retention import prune_checkpoints, prune_inbox
from store.inbox import InboxRepository
from store.inbox_models import InboxItem, InboxKind, InboxStatus
from store.models import Decision, Run, utcnow
from store.repositories import AuditRepository
from tests.agent_runtime.engine_env import REVIEWER, decide, make_env, paused_run


def test_prune_removes_finished_checkpoints_only_and_keeps_the_record(tmp_path, migrated_pg_url):
    env = make_env(tmp_path, url=migrated_pg_url)
    done_run, action_id = paused_run(env)
    decide(env, action_id=action_id, actor=REVIEWER, decision="approve")
    waiting_run, _ = paused_run(env, 'delete_project_file {"path": "notes/old.txt"}')
    runtime = env.runtime
    assert runtime.has_checkpoint(done_run) and runtime.has_checkpoint(waiting_run)

    assert prune_checkpoints(env.db, runtime.checkpointer, older_than=dt.timedelta(days=1)) == 0
    assert prune_checkpoints(env.db, runtime.checkpointer, older_than=dt.timedelta(0)) == 1

    assert not runtime.has_checkpoint(done_run)
    assert runtime.has_checkpoint(waiting_run), "a paused run keeps its checkpoint"
    with env.db.transaction() as s:
        assert {r.status for r in s.scalars(select(Run))} == {"completed", "waiting"}
        assert len(s.scalars(select(Decision)).all()) == 1
        report = AuditRepository(s).verify()
        kinds = [e.kind for e in AuditRepository(s).iter_all()]
    assert report.consistent  # the unkeyed test store: links and head hold
    assert "decision_recorded" in kinds and kinds[-1] == "checkpoints_pruned"


def test_prune_removes_worked_on_stored_clicks_only(tmp_path):
    env = make_env(tmp_path)
    with env.db.transaction() as s:
        inbox = InboxRepository(s)
        done, failed, waiting = (inbox.add(InboxKind.APPROVE, {"n": i}).id for i in range(3))
        for item_id, status in ((done, InboxStatus.DONE), (failed, InboxStatus.FAILED)):
            s.execute(
                update(InboxItem)
                .where(InboxItem.id == item_id)
                .values(status=status, finished_at=utcnow() - dt.timedelta(days=2))
            )
    assert prune_inbox(env.db, older_than=dt.timedelta(days=3)) == 0
    assert prune_inbox(env.db, older_than=dt.timedelta(days=1)) == 2
    with env.db.transaction() as s:
        assert s.scalars(select(InboxItem.id)).all() == [waiting], "a queued click stays"
