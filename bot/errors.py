"""One place that turns refusals and typed errors into what a Slack user reads."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from agent_runtime.authorization import Refusal
from agent_runtime.cancel import CancelOutcome, CancelResult
from agent_runtime.errors import ApprovalError, NotPermitted
from agent_runtime.kill_switch import SwitchOutcome
from bot.text import mention, verbatim
from store.audit_chain import AuditChainError

logger = logging.getLogger(__name__)

REFUSALS: dict[Refusal, str] = {
    Refusal.UNKNOWN_APPROVAL: "I can't find that approval. The card may be from an old run.",
    Refusal.OTHER_WORKSPACE: "This approval belongs to another workspace; you can't decide it.",
    Refusal.ALREADY_DECIDED: "This action has already been decided; nothing changed.",
    Refusal.EXPIRED: "This approval has expired and was treated as rejected.",
    Refusal.NOT_AN_APPROVER: "You are not one of the approvers for this action.",
    Refusal.SELF_APPROVAL: (
        "You asked for this run, so you can't approve its actions yourself. Another reviewer must."
    ),
    Refusal.DECISION_NOT_ALLOWED: "That decision is not allowed for this action.",
    Refusal.ALREADY_APPROVED: "You already approved this action; another reviewer must sign off.",
    Refusal.REASON_REQUIRED: "Please give a reason.",
    Refusal.INVALID_EDIT: (
        "Those arguments are not valid for this tool or the policy; nothing was recorded."
    ),
    Refusal.STALE_VERSION: (
        "This card changed since you saw it, so your decision was not recorded. Review the card "
        "as it is now and decide again."
    ),
    Refusal.MEMBERSHIP_UNCONFIRMED: (
        "Slack could not confirm your user group membership right now, so nothing was decided. "
        "Please try again in a minute."
    ),
    Refusal.RUN_CANCELLED: (
        "This run was cancelled, so its approvals are closed and nothing was recorded. "
        "Nothing of it will run."
    ),
    Refusal.REQUEST_CLOSED: (
        "This approval was closed without running anything (its card says why), so nothing "
        "was recorded."
    ),
    Refusal.EXECUTION_PAUSED: (
        "An admin has paused all gated actions, so nothing can be approved right now and your "
        "decision was not recorded. Approve again once they resume (a reject is still recorded)."
    ),
    Refusal.POLICY_CHANGED: (
        "The approval policy changed since this card was posted, so it can no longer be decided "
        "and nothing ran. The requester can ask again under the current policy."
    ),
}
SWITCH_ANSWERS: dict[SwitchOutcome, str] = {
    SwitchOutcome.PAUSED: (
        "Gated execution is paused: no gated tool runs and no card can be approved until "
        "`/approvals resume`. The escalation channel was told."
    ),
    SwitchOutcome.RESUMED: "Gated execution resumed: cards can be approved and approved "
    "actions run again.",
    SwitchOutcome.ALREADY_PAUSED: "Gated execution was already paused; nothing changed.",
    SwitchOutcome.ALREADY_RUNNING: "Gated execution is not paused; nothing changed.",
    SwitchOutcome.NOT_ALLOWED: "Only admins can pause or resume gated execution. Nothing changed.",
    SwitchOutcome.MEMBERSHIP_UNCONFIRMED: (
        "Slack could not confirm your user group membership right now, so nothing changed. "
        "Please try again in a minute."
    ),
}
CANCEL_ANSWERS: dict[CancelOutcome, str] = {
    CancelOutcome.FINISHED: (
        "This run is no longer waiting: it already finished, so there is nothing to cancel."
    ),
    CancelOutcome.NOT_ALLOWED: (
        "Only the person who started this run, or an admin, can cancel it. Nothing changed."
    ),
    CancelOutcome.UNKNOWN_RUN: "I can't find that run. The message may be from an old run.",
    CancelOutcome.OTHER_WORKSPACE: "This run belongs to another workspace; you can't cancel it.",
    CancelOutcome.BUSY: (
        "This run is working right now (the agent or a tool is running), so it was not "
        "cancelled. Cancel stops a run while it waits for approval: try again in a moment."
    ),
    CancelOutcome.MEMBERSHIP_UNCONFIRMED: (
        "Slack could not confirm your user group membership right now, so the run was not "
        "cancelled. Please try again in a minute."
    ),
}
BUSY = "The bot is busy right now; please try again in a moment. Nothing was recorded."
BUSY_CLICK = (
    "The bot is busy right now, so your click was not recorded. Please click again in a moment."
)
BUSY_SUBMISSION = (
    "The bot is busy right now, so this was not sent. What you entered is kept: "
    "submit again in a moment."
)
AUDIT_UNWRITABLE = (
    "The audit log cannot be written, so this was not recorded. An operator must check it "
    "(approval-bot audit verify)."
)
GAVE_UP = (
    "Your click could not be completed after several tries. Check the card: if it does not "
    "show your decision, click again. The operators have the details."
)
NOT_INSTALLED = (
    "The approval bot is not installed in this workspace (or was removed from it), so nothing "
    "was done. Ask a workspace admin to install it."
)
UNEXPECTED = (
    "Something went wrong on our side; nothing was decided. The operators have the details."
)


def refusal_text(refusal: Refusal) -> str:
    return REFUSALS[refusal]


def cancel_text(result: CancelResult) -> str:
    """What the clicker reads when a Cancel did not cancel (who cancelled first, if someone
    did: built from the ids and times we recorded)."""
    run = result.run
    if result.outcome is CancelOutcome.ALREADY_CANCELLED and run is not None:
        who = f" by {mention(run.cancelled_by)}" if run.cancelled_by else ""
        at = run.cancelled_at
        when = f" at {at:%Y-%m-%d %H:%M} UTC" if at is not None else ""
        return f"This run was already cancelled{who}{when}; nothing changed."
    return CANCEL_ANSWERS.get(result.outcome, UNEXPECTED)


def user_message(exc: BaseException) -> str:
    """Text for an error raised while serving a user; unexpected ones are logged in full."""
    if isinstance(exc, NotPermitted):
        return "You are not allowed to start agent runs here. Ask an operator to add you."
    if isinstance(exc, ApprovalError):
        return verbatim(str(exc), 2000)  # it may quote agent text: shown as code
    if isinstance(exc, AuditChainError):
        logger.exception("the audit log cannot be written", exc_info=exc)
        return AUDIT_UNWRITABLE
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error", "unknown_error")
        if error in ("not_in_channel", "channel_not_found"):
            return "I can't post in this channel. Invite me to it first (/invite @approval-bot)."
        logger.exception("Slack API call failed: %s", error)
        return f"Slack refused a call ({error}); nothing was decided."
    logger.exception("unexpected error while serving a user", exc_info=exc)
    return UNEXPECTED
