"""Every status and outcome the store keeps, as enums. They are ``StrEnum``s: the stored value
is the plain word, so rows written before them, exports and SQL read the same."""

from __future__ import annotations

import enum


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    """Paused on at least one approval."""
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    """Stopped by its requester or an admin: its open approvals closed, nothing resumed."""


FINISHED_RUN = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
UNFINISHED_RUN = (RunStatus.RUNNING, RunStatus.WAITING)


class RequestStatus(enum.StrEnum):
    """pending -> resuming -> resolved, or expired, invalidated, failed, cancelled."""

    PENDING = "pending"
    RESUMING = "resuming"
    """Claimed by one process, which resumes the thread."""
    RESOLVED = "resolved"
    EXPIRED = "expired"
    INVALIDATED = "invalidated"
    """Closed without resuming: the thread or the policy moved on."""
    FAILED = "failed"
    CANCELLED = "cancelled"
    """Closed without resuming because its run was cancelled."""


OPEN_REQUEST = (RequestStatus.PENDING, RequestStatus.RESUMING)


class ActionOutcome(enum.StrEnum):
    APPROVED = "approved"
    EDITED = "edited"
    """Approved with the arguments a reviewer changed."""
    REJECTED = "rejected"
    RESPONDED = "responded"
    EXPIRED = "expired"


RUNS_THE_TOOL = (ActionOutcome.APPROVED, ActionOutcome.EDITED)


class DecisionType(enum.StrEnum):
    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    RESPOND = "respond"
