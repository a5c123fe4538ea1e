"""An engine on a real store and checkpointer, with a notifier that records what it is told."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_runtime.agents.workspace import Workspace
from agent_runtime.authorization import Actor
from agent_runtime.catalog import ToolCatalog
from agent_runtime.engine import ApprovalEngine, DecisionResult
from agent_runtime.gate import EffectGate
from agent_runtime.graph_runtime import DEFAULT_AGENT, GraphRuntime, open_runtime
from agent_runtime.notifier import MessageRef
from agent_runtime.policy import Policy, load_policy
from store.db import Database
from store.migrate import current_revision, head_revision
from store.models import utcnow
from tests.migrated import migrated_sqlite_url

SEND = 'send_external_message {"recipient": "a@example.com", "text": "hi"}'
REVIEWER = Actor("U0REL1", "T1")
REQUESTER = Actor("U0ALICE", "T1")
NEWEST = head_revision()  # the revision every store handed to make_env must be at


class Clock:
    """A clock a test moves: ``clock.now += ...``."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now


@dataclass
class Recorder:
    requested: list = field(default_factory=list)
    updated: list = field(default_factory=list)
    finished: list = field(default_factory=list)
    expired: list = field(default_factory=list)
    reminded: list = field(default_factory=list)
    blocked: list = field(default_factory=list)
    pinged: list = field(default_factory=list)

    def approval_requested(self, approval):  # type: ignore[no-untyped-def]
        self.requested.append(approval)
        return MessageRef("C1", f"{len(self.requested)}.0")

    def approval_updated(self, approval):  # type: ignore[no-untyped-def]
        self.updated.append(approval)

    def find_card(self, approval):  # type: ignore[no-untyped-def]
        return None

    def reviewers_needed(self, approval, reach, *, after):  # type: ignore[no-untyped-def]
        self.pinged.append((approval, reach, after))

    def run_finished(self, run):  # type: ignore[no-untyped-def]
        self.finished.append(run)

    def approval_expired(self, approval):  # type: ignore[no-untyped-def]
        self.expired.append(approval)

    def approval_reminder(self, approval, reviewers, escalation_channel):  # type: ignore[no-untyped-def]
        self.reminded.append((approval, reviewers, escalation_channel))

    def call_blocked(self, run, *, tool_name, reason):  # type: ignore[no-untyped-def]
        self.blocked.append((run, tool_name, reason))


@dataclass
class Env:
    engine: ApprovalEngine
    notes: Recorder
    workspace: Workspace
    db: Database
    gate: EffectGate
    runtime: GraphRuntime
    policy: Policy
    clock: Callable[[], dt.datetime] = utcnow

    def with_policy(self, **changes: Any) -> None:
        """Restart the engine under a changed policy (as a new deployment would), on the same
        store, thread and notifier."""
        policy = self.policy = self.policy.model_copy(update=changes)
        self.engine = ApprovalEngine(
            db=self.db, runtime=self.runtime, policy=policy, notifier=self.notes, clock=self.clock
        )


def make_env(
    tmp_path: Path,
    agent: str = DEFAULT_AGENT,
    *,
    url: str | None = None,
    clock: Callable[[], dt.datetime] = utcnow,
    key: bytes | None = None,
    usergroup_members: Callable[[str], frozenset[str]] | None = None,
    lease: dt.timedelta | None = None,
) -> Env:
    url = url or migrated_sqlite_url(tmp_path / "e.db")
    db = Database(url)
    revision = current_revision(db.engine)
    assert revision == NEWEST, f"{url} is at revision {revision}, not the newest"
    policy = load_policy(None)
    workspace = Workspace(tmp_path / "ws").ensure()
    notes = Recorder()
    gate = EffectGate(db=db, policy=policy, catalog=ToolCatalog(), notifier=notes)
    runtime = open_runtime(
        database_url=url,
        agent=agent,
        model="offline",
        policy=policy,
        workspace=workspace,
        gate=gate,
        key=key,
    )
    engine = ApprovalEngine(
        db=db,
        runtime=runtime,
        policy=policy,
        notifier=notes,
        clock=clock,
        **({"usergroup_members": usergroup_members} if usergroup_members else {}),
        **({"lease": lease} if lease else {}),
    )
    return Env(engine, notes, workspace, db, gate, runtime, policy, clock)


def paused_run(env: Env, text: str = SEND) -> tuple[str, str]:
    run = env.engine.start_run(actor=REQUESTER, channel_id="C1", text=text)
    env.engine.execute_run(run.id)
    approval = env.notes.requested[-1]
    return run.id, approval.actions[0].id


def decide(env: Env, *, action_id: str, **kwargs: Any) -> DecisionResult:
    """A decision on the version the reviewer sees now (what the card's button carries)."""
    view = env.engine.approval_of_action(action_id)
    current = (
        next((a.action_hash for a in view.actions if a.id == action_id), None) if view else None
    )
    return env.engine.decide(
        action_id=action_id, seen_hash=kwargs.pop("seen_hash", current), **kwargs
    )
