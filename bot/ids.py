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


class CallbackId(enum.StrEnum):
    REJECT_MODAL = "approval.reject_modal"
    RESPOND_MODAL = "approval.respond_modal"
    EDIT_MODAL = "approval.edit_modal"
    ARGS_MODAL = "approval.args_modal"


class BlockId(enum.StrEnum):
    REJECT_REASON = "reject_reason"
    RESPOND_ANSWER = "respond_answer"
    ACTION_ROW_PREFIX = "action:"
    REQUEST_ROW_PREFIX = "request:"
    EDIT_FIELD_PREFIX = "arg:"


class InputId(enum.StrEnum):
    REASON = "reason"
    ANSWER = "answer"
    VALUE = "value"


SLASH_COMMAND = "/agent"
