"""How the engine reports outcomes without knowing Slack: the bot implements this interface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agent_runtime.reach import Reach
from agent_runtime.views import ApprovalView, DigestView, Reviewers, RunView
from store.switch import SwitchState


@dataclass(frozen=True)
class MessageRef:
    channel: str
    ts: str


class Notifier(Protocol):
    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        """Show a new approval; return where the card lives so later updates can find it."""

    def approval_updated(self, approval: ApprovalView) -> None:
        """Re-render the card after a decision, a resume or an invalidation."""

    def reviewers_needed(self, approval: ApprovalView, reach: Reach, *, after: str | None) -> None:
        """Ping the reviewers who can act now (mentions where the card is, direct messages
        linking to it); ``after``: the reviewer whose sign-off left more to give."""

    def find_card(self, approval: ApprovalView) -> MessageRef | None:
        """Where this approval's card already is, if it was posted though its post seemed to
        fail (an error or a timeout after the chat took it); None if there is no such card."""

    def run_finished(self, run: RunView) -> None:
        """The run completed or failed: tell its thread. ``Undeliverable``: the thread will
        never take it (any other error may pass: it is tried again later)."""

    def run_finished_directly(self, run: RunView, *, reason: str) -> None:
        """Tell the requester, in a direct message, the result its thread refused for good
        (``reason``: the chat's word for why). ``Undeliverable``: they can never be written
        to (any other error may pass)."""

    def approval_expired(self, approval: ApprovalView) -> None:
        """Tell the run's thread that nobody decided in time and the actions were rejected."""

    def approval_reminder(
        self, approval: ApprovalView, reviewers: Reviewers, escalation_channel: str | None
    ) -> None:
        """Nudge the reviewers who can still decide; copy the escalation channel if any."""

    def call_blocked(self, run: RunView, *, tool_name: str, reason: str) -> None:
        """A gated tool refused to run without a matching approval: tell the run's thread."""

    def execution_switched(self, state: SwitchState, *, channel: str, team_id: str | None) -> None:
        """An admin paused or resumed all gated execution: announce it in ``channel``, whose
        workspace may differ from ``team_id``, the admin's (None: an operator at a shell)."""

    def digest_posted(self, digest: DigestView) -> MessageRef | None:
        """Post a digest of several approvals in its channel; return where it lives."""

    def digest_updated(self, digest: DigestView) -> None:
        """Redraw a posted digest from the current state of the approvals it lists."""

    def find_digest(self, digest: DigestView) -> MessageRef | None:
        """Where this digest already is, if its post reached the chat though its answer was
        lost; None if there is no such message."""


class NullNotifier:
    """For scripts and tests that only look at the store."""

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        return None

    def approval_updated(self, approval: ApprovalView) -> None:
        return None

    def reviewers_needed(self, approval: ApprovalView, reach: Reach, *, after: str | None) -> None:
        return None

    def find_card(self, approval: ApprovalView) -> MessageRef | None:
        return None

    def run_finished(self, run: RunView) -> None:
        return None

    def run_finished_directly(self, run: RunView, *, reason: str) -> None:
        return None

    def approval_expired(self, approval: ApprovalView) -> None:
        return None

    def approval_reminder(
        self, approval: ApprovalView, reviewers: Reviewers, escalation_channel: str | None
    ) -> None:
        return None

    def call_blocked(self, run: RunView, *, tool_name: str, reason: str) -> None:
        return None

    def execution_switched(self, state: SwitchState, *, channel: str, team_id: str | None) -> None:
        return None

    def digest_posted(self, digest: DigestView) -> MessageRef | None:
        return None

    def digest_updated(self, digest: DigestView) -> None:
        return None

    def find_digest(self, digest: DigestView) -> MessageRef | None:
        return None
