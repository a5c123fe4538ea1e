"""Buttons on approval cards. Button values are opaque ids only, authorized again server-side."""

from __future__ import annotations

from slack_bolt import App

from bot.ids import ActionId
from bot.listeners.actions.decide import on_approve, on_approve_all
from bot.listeners.actions.modals import (
    on_edit,
    on_reject,
    on_respond,
    on_view_args,
    on_view_args_page,
)
from bot.listeners.actions.review import on_review_all, on_review_page


def register(app: App) -> None:
    app.action(ActionId.APPROVE)(on_approve)
    app.action(ActionId.APPROVE_ALL)(on_approve_all)
    app.action(ActionId.REJECT)(on_reject)
    app.action(ActionId.EDIT)(on_edit)
    app.action(ActionId.RESPOND)(on_respond)
    app.action(ActionId.VIEW_ARGS)(on_view_args)
    app.action(ActionId.VIEW_ARGS_PAGE)(on_view_args_page)
    app.action(ActionId.REVIEW_ALL)(on_review_all)
    app.action(ActionId.REVIEW_PAGE)(on_review_page)
