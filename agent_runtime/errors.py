"""Typed errors of the approval engine. The bot maps each to user-facing text in one place."""

from __future__ import annotations


class ApprovalError(Exception):
    """Base class: something a user or operator must be told about in plain words."""


class PolicyError(ApprovalError):
    """The policy file is missing, unreadable or invalid."""


class AgentLoadError(ApprovalError):
    """The AGENT hook or the model could not be loaded."""


class UnsupportedInterrupt(ApprovalError):
    """The graph paused on an interrupt whose shape we do not know how to review."""


class InvalidDecisions(ApprovalError):
    """The decisions for an interrupt would be refused by LangGraph; nothing was resumed."""


class NotPermitted(ApprovalError):
    """The user may not start a run."""


class MembershipUnconfirmed(ApprovalError):
    """Who is in a user group could not be confirmed right now: authorization fails closed."""
