"""Approve, Approve all: stored in the decision inbox before the ack; the work inbox workers
do for them."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from slack_bolt import Ack, BoltContext

from agent_runtime.authorization import Actor, Refusal, closed_refusal
from agent_runtime.notifier import MessageRef
from agent_runtime.views import ActionView, ApprovalView, versions_digest
from bot.blocks.approval_card import shown_on_card
from bot.blocks.notices import stale_notice
from bot.errors import refusal_text
from bot.ids import ActionId, parse_choice
from bot.listeners.actions.review import refresh_review
from bot.listeners.payloads import Click, payload_of
from bot.services import BotServices, services_of
from bot.work import CardRef, OpenView, Work
from store.inbox_models import InboxKind


def click_work(click: Click, **fields: Any) -> Work:
    card = click.card
    view = click.view
    return Work.of(
        click.actor,
        what=click.action.action_id,
        channel=click.channel_id,
        card=CardRef(channel=card.channel, ts=card.ts) if card else None,
        view=OpenView(**view.model_dump()) if view else None,
        **fields,
    )


def store_then_ack(ack: Ack, services: BotServices, kind: InboxKind, work: Work) -> None:
    """The click is stored before Slack hears we have it; if it cannot be, the user is told
    to try again (and the drop is audited), as when the bot is too busy."""
    stored = services.store(kind, work.model_dump(mode="json"))
    ack()
    if not stored:
        services.dropped(work.drop(), tell=True)


def on_approve(ack: Ack, context: BoltContext) -> None:
    click = payload_of(context, Click)
    services = services_of(context)
    services.metrics.inc("clicks")
    action_id, seen = parse_choice(click.action.value)
    work = click_work(click, action_id=action_id, seen=seen)
    store_then_ack(ack, services, InboxKind.APPROVE, work)


def on_approve_all(ack: Ack, context: BoltContext) -> None:
    click = payload_of(context, Click)
    services = services_of(context)
    services.metrics.inc("clicks")
    request_id, digest = parse_choice(click.action.value)
    work = click_work(click, request_id=request_id, seen=digest)
    store_then_ack(ack, services, InboxKind.APPROVE_ALL, work)


def decide_and_refresh(services: BotServices, work: Work, *, attempt_key: str | None) -> None:
    """An Approve from the card or from the review modal; the modal is redrawn afterwards."""
    assert work.action_id is not None
    decide(
        services,
        work.action_id,
        work.seen,
        work.who,
        work.channel,
        card=work.card_ref,
        attempt_key=attempt_key,
    )
    refresh_review(services, work.view, actor=work.who)


def decide(
    services: BotServices,
    action_id: str,
    seen: str | None,
    actor: Actor,
    channel: str | None,
    *,
    decision: str = "approve",
    message: str | None = None,
    edited_args: dict[str, Any] | None = None,
    card: MessageRef | None = None,
    attempt_key: str | None = None,
) -> None:
    """Record the decision on the version the reviewer saw (the engine resumes if it was the
    last one needed), or explain the refusal, showing what changed if the card moved on.
    ``card``: the message clicked, which the engine adopts if it has no card reference yet;
    ``attempt_key``: the stored click's id, so a redo after a crash records nothing twice."""
    result = services.engine.decide(
        action_id=action_id[:64],
        actor=actor,
        decision=decision,
        seen_hash=seen,
        message=message,
        edited_args=edited_args,
        card=card,
        attempt_key=attempt_key,
    )
    if result.refusal is None:
        services.metrics.inc("decisions_recorded")
        return
    services.metrics.inc("decisions_refused")
    current = result.current
    if channel is None and current is not None:
        channel = current.card_channel
    target = next((a for a in current.actions if a.id == action_id), None) if current else None
    if result.refusal is Refusal.STALE_VERSION and target is not None and seen is not None:
        tell(services, channel, actor, **stale_notice(target, seen=seen))
        return
    tell(services, channel, actor, text=refusal_text(result.refusal))


def approve_all(services: BotServices, work: Work, *, attempt_key: str | None) -> None:
    """Approve the actions the card showed, at the versions it showed, if the reviewer may;
    a card that changed since is refused whole. Each refused attempt is audited: as a whole
    here, action by action by the engine, every row naming this one attempt. A redo after a
    crash counts what this attempt already recorded as part of what the card showed."""
    request_id, actor, channel = work.request_id or "", work.who, work.channel
    via = {"via": ActionId.APPROVE_ALL, "attempt": attempt_key or uuid.uuid4().hex}
    approval = services.engine.approval(request_id[:64])
    approvable = approval.approvable if approval is not None else ()
    earlier = _recorded_by(services, request_id[:64], attempt_key) if approval else {}
    unseen = {a.id for a in approvable} - shown_on_card(approval) if approval else set()
    refusal: Refusal | None = None
    if approval is None:
        refusal = Refusal.UNKNOWN_APPROVAL
    elif (closed := closed_refusal(approval.status)) is not None:  # closed since it was drawn
        refusal = closed
    elif unseen or work.seen != _digest(approval, approvable, earlier):
        refusal = Refusal.STALE_VERSION
    if refusal is not None and earlier:
        return  # the card moved on after this attempt's first decisions: they stand
    if refusal is not None:
        _refuse_all(services, request_id, actor, refusal, via=via)
        tell(services, channel, actor, text=refusal_text(refusal))
        return
    approved, refusals = _approve_each(
        services, approvable, work, earlier=earlier, via=via, attempt_key=attempt_key
    )
    approved += len(set(earlier) - {a.id for a in approvable})
    services.metrics.inc("decisions_recorded", approved)
    if not approved:
        first = refusals[0] if refusals else Refusal.ALREADY_DECIDED
        _refuse_all(services, request_id, actor, first, via=via)
    if refusals or not approved:
        tell(
            services,
            channel,
            actor,
            text=f"You approved {approved} action(s); {len(refusals)} need another reviewer or "
            "were already decided.",
        )


def _approve_each(
    services: BotServices,
    approvable: tuple[ActionView, ...],
    work: Work,
    *,
    earlier: dict[str, str],
    via: dict[str, str],
    attempt_key: str | None,
) -> tuple[int, list[Refusal]]:
    """Each action at the version the card showed; then one ping for the whole click, naming
    who can still sign off any action it left waiting for more approvals."""
    approved, refusals, progressed = 0, list[Refusal](), list[str]()
    for action in approvable:
        result = services.engine.decide(
            action_id=action.id,
            actor=work.who,
            decision="approve",
            seen_hash=earlier.get(action.id, action.action_hash),
            card=work.card_ref,
            via=via,
            attempt_key=attempt_key,
            ping=False,
        )
        if result.refusal is None:
            approved += 1
            progressed += result.progressed
        else:
            refusals.append(result.refusal)
    if progressed:
        request_id = (work.request_id or "")[:64]
        services.engine.ping_reviewers(
            request_id, action_ids=tuple(progressed), after=work.who.user_id
        )
    return approved, refusals


def _recorded_by(services: BotServices, request_id: str, attempt_key: str | None) -> dict[str, str]:
    """Action id -> version, of the decisions this attempt recorded before a crash."""
    if attempt_key is None:
        return {}
    return services.engine.recorded_by(request_id, attempt_key)


def _digest(
    approval: ApprovalView, approvable: tuple[ActionView, ...], earlier: dict[str, str]
) -> str:
    """What the card's Approve all covered: the actions open now, and those this attempt
    already decided, at the versions it decided them."""
    covered = {a.id: a for a in approvable}
    for action in approval.actions:
        if action.id in earlier:
            covered[action.id] = replace(action, action_hash=earlier[action.id])
    return versions_digest(covered.values())


def _refuse_all(
    services: BotServices,
    request_id: str,
    actor: Actor,
    refusal: Refusal,
    *,
    via: dict[str, str],
) -> None:
    services.metrics.inc("decisions_refused")
    services.engine.record_refusal(
        request_id=request_id, actor=actor, refusal=refusal, decision="approve_all", via=via
    )


def tell(
    services: BotServices,
    channel: str | None,
    actor: Actor,
    *,
    text: str,
    blocks: list[dict[str, Any]] | None = None,
) -> None:
    """An ephemeral in the reviewer's own workspace (the one the click came from)."""
    if channel and actor.user_id:
        services.slack(actor.team_id).chat_postEphemeral(
            channel=channel, user=actor.user_id, text=text, blocks=blocks or None
        )
