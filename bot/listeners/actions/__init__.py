"""Buttons on approval cards and run messages. Button values are opaque ids only, authorized
again server-side."""

from __future__ import annotations

from slack_bolt import App

from bot.ids import ActionId
from bot.listeners.actions.approvals_page import on_approvals_page
from bot.listeners.actions.cancel import on_cancel_run
from bot.listeners.actions.decide import on_approve, on_approve_all
from bot.listeners.actions.digest import on_digest_approve
from bot.listeners.actions.modals import (
    on_edit,
    on_reject,
    on_respond,
    on_view_args,
    on_view_args_page,
)
from bot.listeners.actions.review import on_review_all, on_review_page


def register(app: App) -> None:
    """Only ``block_actions`` (not legacy attachment or dialog payloads) reach these."""
    for action_id, listener in (
        (ActionId.APPROVE, on_approve),
        (ActionId.APPROVE_ALL, on_approve_all),
        (ActionId.REJECT, on_reject),
        (ActionId.EDIT, on_edit),
        (ActionId.RESPOND, on_respond),
        (ActionId.VIEW_ARGS, on_view_args),
        (ActionId.VIEW_ARGS_PAGE, on_view_args_page),
        (ActionId.REVIEW_ALL, on_review_all),
        (ActionId.REVIEW_PAGE, on_review_page),
        (ActionId.CANCEL_RUN, on_cancel_run),
        (ActionId.APPROVALS_PAGE, on_approvals_page),
        (ActionId.DIGEST_APPROVE, on_digest_approve),
    ):
        app.action({"type": "block_actions", "action_id": str(action_id)})(listener)
