"""Every Slack id the bot owns (action_id, callback_id, block ids), in one place."""

from __future__ import annotations

import enum


class ActionId(enum.StrEnum):
    APPROVE = "approval.approve"
    REJECT = "approval.reject"
    EDIT = "approval.edit"
    RESPOND = "approval.respond"
    APPROVE_ALL = "approval.approve_all"
    VIEW_ARGS = "approval.view_args"
    VIEW_ARGS_PAGE = "approval.view_args_page"
    REVIEW_ALL = "approval.review_all"
    REVIEW_PAGE = "approval.review_page"
    CANCEL_RUN = "run.cancel"
    APPROVALS_PAGE = "approvals.page"
    """A page of ``/approvals``: the value is the request id the page starts after."""
    DIGEST_APPROVE = "digest.approve"
    """Approve on a digest row: decided like a card's Approve, but the message clicked is
    never taken for the request's card. (Reject on a digest is the card's Reject.)"""


class CallbackId(enum.StrEnum):
    REJECT_MODAL = "approval.reject_modal"
    RESPOND_MODAL = "approval.respond_modal"
    EDIT_MODAL = "approval.edit_modal"
    ARGS_MODAL = "approval.args_modal"
    REVIEW_MODAL = "approval.review_modal"


class BlockId(enum.StrEnum):
    REJECT_REASON = "reject_reason"
    RESPOND_ANSWER = "respond_answer"
    ACTION_ROW_PREFIX = "action:"
    REQUEST_ROW_PREFIX = "request:"
    RUN_ROW_PREFIX = "run:"
    DIGEST_ROW_PREFIX = "digest:"
    EDIT_FIELD_PREFIX = "arg:"


class InputId(enum.StrEnum):
    REASON = "reason"
    ANSWER = "answer"
    VALUE = "value"


SLASH_COMMAND = "/agent"
APPROVALS_COMMAND = "/approvals"


def choice_value(target_id: str, version: str) -> str:
    """A button value or modal metadata: an opaque id and the version (hash) it showed, so a
    decision always names what the reviewer saw."""
    return f"{target_id}:{version}"


def parse_choice(value: object) -> tuple[str, str | None]:
    """``(id, version)``; a value without a version (an old card) gives ``None``, which the
    engine refuses as out of date."""
    target, _, version = str(value or "").partition(":")
    return target[:64], (version[:64] or None)
