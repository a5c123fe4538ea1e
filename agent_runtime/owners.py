"""The engine's owners, created in one place and each handed only the collaborators it needs.
The façade in ``engine`` is the only orchestrator between them; each does one thing and calls
none of the others back:

- ``RunLifecycle``: runs started, executed, their stops recorded (approvals or results);
  ``RunStarts``: a run stored and its thread posted under its lock;
- ``DecisionRecorder``: decisions authorized and recorded, the last one claiming the request;
- ``Resumer``: a claimed request resumed once, after checking the checkpoint;
- ``Claims``: who resumes what, under a lease taken over when its owner dies;
- ``Announcer``: every card, result and notice, and the bookkeeping that repairs them;
- ``Sweeper``: expiry and reminders; ``PendingList``: what waits on a reviewer;
- ``RunCanceller``: a run stopped by its requester or an admin, its open approvals closed;
- ``Overview``: one person's lists (their requests, runs, decisions) and Home tab viewers.
- ``Background``: the sweeps and the reconciling of what dead processes left (resuming and
  carrying a run on stay the façade's, handed in as ``resume`` and ``carry_on``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from agent_runtime.action_roles import ActionRoles
from agent_runtime.announcer import Announcer
from agent_runtime.attempts import AttemptLog
from agent_runtime.background import Background
from agent_runtime.cancel import RunCanceller
from agent_runtime.claims import Claims
from agent_runtime.decisions import DecisionRecorder
from agent_runtime.digests import DigestPoster
from agent_runtime.edits import EditRules
from agent_runtime.interrupt_recorder import InterruptRecorder
from agent_runtime.listing import PendingList
from agent_runtime.notifier import Notifier
from agent_runtime.overview import Overview
from agent_runtime.policy import Policy
from agent_runtime.reach import ReviewerReach
from agent_runtime.resume import Resumer
from agent_runtime.run_starts import RunStarts
from agent_runtime.runs import RunLifecycle
from agent_runtime.runtime import AgentRuntime
from agent_runtime.sweeper import Sweeper
from store.db import Database
from store.locks import ThreadLocks


@dataclass(frozen=True)
class Owners:
    locks: ThreadLocks
    claims: Claims
    announcer: Announcer
    runs: RunLifecycle
    starts: RunStarts
    edits: EditRules
    decisions: DecisionRecorder
    resumer: Resumer
    attempts: AttemptLog
    pending: PendingList
    overview: Overview
    sweeper: Sweeper
    cancels: RunCanceller
    background: Background


def build_owners(
    *,
    db: Database,
    runtime: AgentRuntime,
    policy: Policy,
    notifier: Notifier,
    usergroup_members: Callable[[str], frozenset[str]],
    clock: Callable[[], dt.datetime],
    lease: dt.timedelta,
    card_retry_after: dt.timedelta,
    rounds_every: dt.timedelta,
    resume: Callable[..., None],
    carry_on: Callable[[str], None],
) -> Owners:
    """``resume`` and ``carry_on``: the façade's own, handed to the background rounds."""
    locks = ThreadLocks(db)
    claims = Claims(db=db, clock=clock, lease=lease)
    announcer = Announcer(
        db=db,
        notifier=notifier,
        locks=locks,
        reach=ReviewerReach(policy=policy, usergroup_members=usergroup_members),
        digests=DigestPoster(
            db=db,
            notifier=notifier,
            every=policy.digest.every if policy.digest else None,
            clock=clock,
        ),
    )
    roles = ActionRoles()
    interrupts = InterruptRecorder(
        db=db, policy=policy, catalog=runtime.catalog, claims=claims, clock=clock, roles=roles
    )
    runs = RunLifecycle(
        db=db,
        runtime=runtime,
        policy=policy,
        interrupts=interrupts,
        announcer=announcer,
        clock=clock,
        usergroup_members=usergroup_members,
    )
    edits = EditRules(db=db, catalog=runtime.catalog, policy=policy)
    decisions = DecisionRecorder(
        db=db,
        policy=policy,
        edits=edits,
        claims=claims,
        clock=clock,
        usergroup_members=usergroup_members,
        roles=roles,
    )
    resumer = Resumer(db=db, runtime=runtime, policy=policy, claims=claims, announcer=announcer)
    attempts = AttemptLog(db=db)
    pending = PendingList(db=db, policy=policy, usergroup_members=usergroup_members, clock=clock)
    overview = Overview(db=db, policy=policy, pending=pending)
    sweeper = Sweeper(db=db, policy=policy, claims=claims, announcer=announcer, clock=clock)
    cancels = RunCanceller(db=db, policy=policy, clock=clock, usergroup_members=usergroup_members)
    return Owners(
        locks=locks,
        claims=claims,
        announcer=announcer,
        runs=runs,
        starts=RunStarts(runs=runs, locks=locks),
        edits=edits,
        decisions=decisions,
        resumer=resumer,
        attempts=attempts,
        pending=pending,
        overview=overview,
        sweeper=sweeper,
        cancels=cancels,
        background=Background(
            db=db,
            locks=locks,
            claims=claims,
            sweeper=sweeper,
            announcer=announcer,
            clock=clock,
            card_retry_after=card_retry_after,
            resume=resume,
            carry_on=carry_on,
            give_up=runs.end_stalled,
            rounds_every=rounds_every,
        ),
    )
