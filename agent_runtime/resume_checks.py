"""What a resume checks before it moves a thread: that the checkpoint still holds the very
interrupt that was decided, with the very actions, policy and versions that were reviewed."""

from __future__ import annotations

from langgraph.types import StateSnapshot

from agent_runtime import evidence
from agent_runtime.catalog import ToolCatalog
from agent_runtime.errors import UnsupportedInterrupt
from agent_runtime.policy import Policy
from agent_runtime.recording import drift, version_drift
from agent_runtime.wire import PendingInterrupt, pending_interrupts
from store.db import Database
from store.models import ApprovalRequest
from store.statuses import RUNS_THE_TOOL


def problem(
    request: ApprovalRequest,
    before: StateSnapshot,
    *,
    recovering: bool,
    db: Database,
    policy: Policy,
    catalog: ToolCatalog,
) -> tuple[str | None, PendingInterrupt | None]:
    """Why this request must not be resumed (if so), and the interrupt it answers."""
    if before.created_at is None:  # no checkpoint at all: never start the thread afresh
        return "the run's thread is gone", None
    try:
        pending = pending_of(before, request)
    except UnsupportedInterrupt as exc:
        return f"unreadable interrupt: {exc}", None
    if pending is None:
        if recovering or evidence.spent(db, request):
            return None, None  # resumed by someone: the evidence says what ran
        return "the run is no longer waiting for this approval", None
    found = drift(request, pending, catalog.normalize_or_raw)
    approves = any(a.outcome in RUNS_THE_TOOL for a in request.actions)
    # Rejections (and expiry) still go through: refusing under any version runs nothing.
    if found is None and approves and request.policy_version != policy.version:
        found = f"the approval policy changed since it was decided ({request.policy_version})"
    if found is None and approves:
        found = version_drift(request, environment=policy.environment, versions=catalog.versions)
    return found, pending


def still_waits(state: StateSnapshot, request: ApprovalRequest) -> bool:
    """Whether the thread may still wait on ``request``'s interrupt (nothing delivered it)."""
    if state.created_at is None:
        return True  # no checkpoint: nothing was ever delivered to it
    try:
        return pending_of(state, request) is not None
    except UnsupportedInterrupt:
        return True


def pending_of(state: StateSnapshot, request: ApprovalRequest) -> PendingInterrupt | None:
    """The interrupt ``request`` answers, if the thread still waits on it."""
    return next(
        (p for p in pending_interrupts(state.interrupts) if p.interrupt_id == request.interrupt_id),
        None,
    )
