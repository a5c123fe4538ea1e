"""Every Slack id the bot owns (action_id, callback_id, block ids), in one place."""

from __future__ import annotations

import enum


class ActionId(enum.StrEnum):
    APPROVE = "approval.approve"
    REJECT = "approval.reject"


class CallbackId(enum.StrEnum):
    REJECT_MODAL = "approval.reject_modal"


class BlockId(enum.StrEnum):
    REJECT_REASON = "reject_reason"
    ACTION_ROW_PREFIX = "action:"


class InputId(enum.StrEnum):
    REASON = "reason"


SLASH_COMMAND = "/agent"
