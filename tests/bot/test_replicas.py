"""Two bot processes on one PostgreSQL database: 50 concurrent clicks on 10 approvals."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import select

from agent_runtime.agents.workspace import Workspace
from bot.sandbox import people
from bot.sandbox.driver import buttons
from bot.sandbox.process import BotProcess, bot_env
from bot.sandbox.server import SlackSandbox
from store.audit_models import AuditEvent
from store.db import Database
from store.models import ApprovalRequest

REVIEWERS = [people.RELEASE_MANAGER, people.RELEASE_MANAGER_2, people.SECURITY]


def test_two_replicas_fifty_clicks_one_resume_and_one_effect_each(pg_url, tmp_path: Path):
    sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    state = sandbox.state
    env = bot_env(sandbox, pg_url, tmp_path / "workspace")
    replicas = [BotProcess(env, sandbox), BotProcess(env, sandbox)]
    try:
        for i in range(10):
            text = f'send_external_message {{"recipient": "p{i}@example.com", "text": "n{i}"}}'
            replicas[i % 2].driver.slash_command(
                user=people.REQUESTER, channel=people.CHANNEL, text=text
            )
        cards = state.wait_for(
            lambda: (
                (c := [m for m in state.messages if m.thread_ts and buttons(m)])
                and len(c) == 10
                and c
            ),
            timeout=60,
        )
        clicks = [(cards[i % 10], REVIEWERS[i % 3], replicas[i % 2]) for i in range(50)]
        barrier = threading.Barrier(len(clicks))

        def click(job):  # type: ignore[no-untyped-def]
            card, user, replica = job
            approve = next(b for b in buttons(card) if b.text == "Approve")
            barrier.wait()
            return replica.driver.click(user=user, message=card, button=approve).status

        with ThreadPoolExecutor(len(clicks)) as pool:
            statuses = list(pool.map(click, clicks))
        state.wait_for(
            lambda: len([m for m in state.messages if m.text.startswith("Run finished")]) == 10,
            timeout=90,
        )
        told = state.wait_for(lambda: len(state.ephemerals) >= 40 and list(state.ephemerals))
    finally:
        for replica in replicas:
            replica.stop()
        sandbox.stop()

    assert statuses == [200] * 50
    assert len(told) == 40
    effects = Workspace(tmp_path / "workspace").effects()
    assert sorted(e["recipient"] for e in effects) == sorted(f"p{i}@example.com" for i in range(10))
    db = Database(pg_url)
    with db.transaction() as s:
        kinds = s.scalars(select(AuditEvent.kind)).all()
        statuses_db = s.scalars(select(ApprovalRequest.status)).all()
    db.dispose()
    assert kinds.count("resumed") == 10 and kinds.count("resume_claimed") == 10
    assert kinds.count("decision_recorded") == 10 and kinds.count("decision_refused") == 40
    assert statuses_db == ["resolved"] * 10
