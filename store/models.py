"""Typed SQLAlchemy models of the approval flow: runs, approval requests, actions, decisions,
the rows lists read and the record of each approved call's execution; and the declarative base,
column types, clock and ids every model of the store shares.

Decisions are append-only: repositories offer no way to change or delete them. The other
models live beside their concern (``audit_models``, ``inbox_models``, ``display_models``,
``control_models``), all on this module's ``Base``; ``store.schema`` gathers them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Index, Integer, String, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from store.clean import CleanText
from store.statuses import RequestStatus, RunStatus

CALL_ID_LENGTH = 128
"""What the store keeps of a tool call's id (an action's, and its execution's)."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_id(prefix: str) -> str:
    """Opaque ids: safe to put in button values, meaningless without the database."""
    return f"{prefix}_{uuid.uuid4().hex}"


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Aware UTC datetimes on every backend (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use aware UTC datetimes")
        return value.astimezone(dt.UTC) if value is not None else None

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, dt.datetime: UTCDateTime}


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_requester_created", "requester_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    team_id: Mapped[str | None] = mapped_column(String(32))
    enterprise_id: Mapped[str | None] = mapped_column(String(32))
    requester_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    request_text: Mapped[str] = mapped_column(CleanText)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.RUNNING)
    result_text: Mapped[str | None] = mapped_column(CleanText)
    result_posted: Mapped[bool] = mapped_column(default=False)
    cancelled_by: Mapped[str | None] = mapped_column(String(32))
    """Who cancelled the run (a Slack user id), when it was cancelled."""
    cancelled_at: Mapped[dt.datetime | None] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    requests: Mapped[list[ApprovalRequest]] = relationship(back_populates="run")

    @property
    def thread_id(self) -> str:
        """The LangGraph thread of a run is the run's own id: one run, one thread."""
        return self.id


class ApprovalRequest(Base):
    """One per interrupt: pending -> resuming -> resolved (or expired, invalidated, failed)."""

    __tablename__ = "approval_requests"
    __table_args__ = (
        Index("ix_approval_requests_status", "status"),
        Index("ix_approval_requests_expires_at", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    interrupt_id: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default=RequestStatus.PENDING)
    policy_version: Mapped[str] = mapped_column(String(64))
    environment: Mapped[str | None] = mapped_column(String(64))
    """The policy's ``environment`` (production, staging, ...) the approval was given in."""
    team_id: Mapped[str | None] = mapped_column(String(32))
    enterprise_id: Mapped[str | None] = mapped_column(String(32))
    requester_id: Mapped[str] = mapped_column(String(32))
    expires_at: Mapped[dt.datetime] = mapped_column()
    card_channel: Mapped[str | None] = mapped_column(String(32))
    card_ts: Mapped[str | None] = mapped_column(String(32))
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    claim_expires_at: Mapped[dt.datetime | None] = mapped_column()
    outcome: Mapped[str | None] = mapped_column(CleanText)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    resolved_at: Mapped[dt.datetime | None] = mapped_column()
    remind_at: Mapped[dt.datetime | None] = mapped_column()
    reminded_at: Mapped[dt.datetime | None] = mapped_column()
    card_status: Mapped[str | None] = mapped_column(String(16))
    """The status the card in Slack last showed; differs from ``status`` after a crash."""
    review_channel: Mapped[str | None] = mapped_column(String(32))
    """Where the policy sends the card, chosen when the interrupt was recorded; ``None``: the
    run's thread."""
    digest_channel: Mapped[str | None] = mapped_column(String(32))
    """Set when the policy reviews this request in a digest (no card of its own): the channel
    whose digest lists it."""

    run: Mapped[Run] = relationship(back_populates="requests")
    actions: Mapped[list[Action]] = relationship(
        back_populates="request", order_by="Action.position"
    )


class Action(Base):
    """One gated tool call of an interrupt, with the policy in force when it was recorded."""

    __tablename__ = "actions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    request_id: Mapped[str] = mapped_column(ForeignKey("approval_requests.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    tool_name: Mapped[str] = mapped_column(String(255))
    args: Mapped[dict[str, Any]] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(CleanText, default="")
    allowed_decisions: Mapped[list[Any]] = mapped_column(JSON)
    approver_roles: Mapped[list[Any]] = mapped_column(JSON)
    approvals_required: Mapped[int] = mapped_column(Integer, default=1)
    self_approval: Mapped[bool] = mapped_column(default=False)
    risk: Mapped[str] = mapped_column(String(16), default="medium")
    action_hash: Mapped[str] = mapped_column(String(64))
    operation_id: Mapped[str] = mapped_column(String(64))
    tool_call_id: Mapped[str | None] = mapped_column(String(CALL_ID_LENGTH))
    outcome: Mapped[str | None] = mapped_column(String(16))
    exempt: Mapped[bool] = mapped_column(default=False)
    edited_args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    current_hash: Mapped[str | None] = mapped_column(String(64))
    tool_version: Mapped[str | None] = mapped_column(String(64))
    schema_version: Mapped[str | None] = mapped_column(String(64))
    """The tool's declared version and a digest of its argument schema when reviewed: a tool
    redeployed in between invalidates the approval, as changed arguments do."""
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    @property
    def bound_hash(self) -> str:
        """What approvals bind to now: the edited version's hash once someone edited it.
        ``action_hash`` stays the hash of the call waiting in the checkpoint."""
        return self.current_hash or self.action_hash

    request: Mapped[ApprovalRequest] = relationship(back_populates="actions")
    decisions: Mapped[list[Decision]] = relationship(
        back_populates="action", order_by="Decision.created_at"
    )


class PendingSlot(Base):
    """One approver role of one open action of a pending request: the rows "what waits on me"
    reads. Derived data, kept by store.pending_slots in the transaction that changes the source.
    """

    __tablename__ = "pending_slots"
    __table_args__ = (Index("ix_pending_slots_role_created", "role", "created_at", "request_id"),)

    action_id: Mapped[str] = mapped_column(ForeignKey("actions.id"), primary_key=True)
    role: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_id: Mapped[str] = mapped_column(ForeignKey("approval_requests.id"), index=True)
    expires_at: Mapped[dt.datetime] = mapped_column()
    requester_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[dt.datetime] = mapped_column()
    """The request's: lists show what has waited longest first."""


class Decision(Base):
    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_reviewer_created", "reviewer_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    action_id: Mapped[str] = mapped_column(ForeignKey("actions.id"), index=True)
    request_id: Mapped[str] = mapped_column(ForeignKey("approval_requests.id"), index=True)
    reviewer_id: Mapped[str] = mapped_column(String(32))
    team_id: Mapped[str | None] = mapped_column(String(32))
    type: Mapped[str] = mapped_column(String(16))
    message: Mapped[str | None] = mapped_column(CleanText)
    action_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    attempt_key: Mapped[str | None] = mapped_column(String(64), index=True)
    """The one attempt (e.g. an inbox item) that recorded it: a redo of that attempt after a
    crash finds this row and records nothing again."""

    action: Mapped[Action] = relationship(back_populates="decisions")


class ActionExecution(Base):
    """The point-of-effect record: which tool call spent an approved action, and what it
    returned. One row per action (its primary key), so an approval is spent once; the same
    tool call repeated after a crash finds its row and gets the stored result back."""

    __tablename__ = "action_executions"

    action_id: Mapped[str] = mapped_column(ForeignKey("actions.id"), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(255), unique=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(CALL_ID_LENGTH))
    tool: Mapped[str] = mapped_column(String(255))
    result: Mapped[str | None] = mapped_column(CleanText)
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column()
