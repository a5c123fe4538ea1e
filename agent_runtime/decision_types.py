"""What a decision attempt carries, and what recording it gave."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_runtime.authorization import Actor, Refusal
from agent_runtime.notifier import MessageRef
from agent_runtime.views import ApprovalView
from store.models import ApprovalRequest


@dataclass(frozen=True)
class DecisionResult:
    refusal: Refusal | None
    approval: ApprovalView | None = None
    completed: bool = False
    """This decision completed the request and this process claimed it: resume it."""
    current: ApprovalView | None = None
    """On a refusal: the approval as it is now, to explain what changed."""
    progressed: tuple[str, ...] = ()
    """Actions this decision signed off that still wait for more approvals: their remaining
    reviewers are told. Empty for a redo, which tells nobody again."""
    claimed: ApprovalRequest | None = field(default=None, repr=False, compare=False)
    """When ``completed``: the request as the claim left it, read under its row lock in the
    claiming transaction, so that the resumer need not read it again (it checks only that
    the claim and the run are unchanged)."""
    run_held: bool = False
    """When ``completed``: the caller's ``hold_run`` took the run's thread lock before the
    claim was committed, so nobody ended or cancelled the run, nor resumed or closed the
    request, since ``claimed`` was read (each of those holds the lock; a take-over of a claim
    whose lease ran out waits for it, and finds the request closed)."""


@dataclass(frozen=True)
class Attempt:
    actor: Actor
    decision: str
    seen_hash: str | None
    """The version (action hash) the reviewer saw when deciding: button values and modal
    metadata carry it. A decision on any other version is refused."""
    message: str | None = None
    edited_args: dict[str, Any] | None = None
    card: MessageRef | None = None
    """The message clicked, when the decision came from a button on the card."""
    via: dict[str, str] | None = None
    """What one click asked for, when it decides several actions (e.g. ``{"via":
    "approve_all", "attempt": ...}``): copied into each audit row so they group as one."""
    attempt_key: str | None = None
    """Names this attempt (e.g. a stored click): kept with the decision, and a second
    ``record`` with the same key finds it and records nothing again."""
