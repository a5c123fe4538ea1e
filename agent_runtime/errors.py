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


class Undeliverable(Exception):
    """A message the chat refused for good where it was meant to go (the channel archived or
    gone, the bot not in it): trying again later changes nothing. ``reason``: the chat's word
    for it, e.g. ``is_archived``."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the message cannot be posted there: {reason}")
        self.reason = reason
