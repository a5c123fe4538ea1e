"""Every decision is bound to the version reviewers saw, and nothing is approved unseen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_runtime.authorization import Refusal
from agent_runtime.views import versions_digest
from bot.errors import REFUSALS
from bot.ids import ActionId, CallbackId, choice_value
from bot.sandbox import people
from bot.sandbox.driver import Button, buttons
from store.audit_models import AuditEvent
from store.models import Decision
from tests.bot.flows import (
    PUBLISH,
    button,
    card_now,
    ephemeral_for,
    open_modal,
    result_message,
    start_run,
)

TWO_SIGN_OFFS = """
version: "bound-1"
roles:
  release-managers: {users: [U0REL1, U0REL2], usergroups: [S0RELMGR]}
  security: {users: [U0SEC1]}
tools:
  publish_report:
    risk: high
    decisions: [approve, edit, reject]
    approvers: [release-managers]
    approvals_required: 2
  send_external_message: {decisions: [approve, reject], approvers: [security]}
"""
INTERNAL = {"type": "static_select", "selected_option": {"value": '"internal"'}}


def policy(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusals(h) -> list[AuditEvent]:  # type: ignore[no-untyped-def]
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(AuditEvent).where(AuditEvent.kind == "decision_refused")))


def effects(h) -> list[str]:  # type: ignore[no-untyped-def]
    return [e["tool"] for e in h.workspace.effects()]


@pytest.mark.parametrize(
    ("when", "call"),
    [
        ("{channel: public}", '{"path": "reports/weekly.md"}'),  # the tool's default is public
        ("{notify_subscribers: true}", '{"path": "reports/weekly.md"}'),
        (
            "{notify_subscribers: true}",
            '{"path": "reports/weekly.md", "notify_subscribers": "yes"}',
        ),
        (
            "{notify_subscribers: true}",
            '{"path": "reports/weekly.md", "notify_subscribers": "true"}',
        ),
    ],
)
def test_when_sees_the_arguments_the_tool_will_run_with(
    serve_bot, sqlite_url, tmp_path, when, call
):
    text = TWO_SIGN_OFFS.replace(
        "approvals_required: 2", f"approvals_required: 2\n    when: {when}"
    )
    h = serve_bot(sqlite_url, policy_file=policy(tmp_path, text))
    _root, card = start_run(h, f"publish_report {call}")
    shown = json.dumps(card.blocks)
    assert "Approve" in [b.text for b in buttons(card)]
    assert '\\"channel\\": \\"public\\"' in shown or "public" in shown, "defaults are shown"
    assert effects(h) == [], "nothing ran without a card"


def test_a_click_on_a_version_that_was_edited_since_is_refused_and_explained(
    serve_bot, sqlite_url, tmp_path
):
    h = serve_bot(sqlite_url, policy_file=policy(tmp_path, TWO_SIGN_OFFS))
    root, card = start_run(h, PUBLISH)
    seen_by_a = button(card, "Approve")  # reviewer A's card, before anyone edits

    edit = open_modal(h, people.RELEASE_MANAGER_2, card, "Edit")
    h.driver.submit_view(
        user=people.RELEASE_MANAGER_2, view_id=edit.id, values={"arg:channel": {"value": INTERNAL}}
    )
    h.state.wait_for(lambda: "Edited arguments" in json.dumps(card_now(h, card).blocks))

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=seen_by_a)
    note = h.state.wait_for(lambda: h.state.ephemerals_for(people.RELEASE_MANAGER))[-1]
    shown = json.dumps(note.blocks)
    assert "changed since you saw it" in note.text
    assert f"<@{people.RELEASE_MANAGER_2}> edited its arguments" in shown
    assert '+  \\"channel\\": \\"internal\\"' in shown, "the notice shows what changed"
    assert effects(h) == [], "the stale click did not complete the edited version"
    stale = [e for e in refusals(h) if e.reason == Refusal.STALE_VERSION]
    assert len(stale) == 1 and stale[0].actor_id == people.RELEASE_MANAGER
    assert stale[0].detail["seen_hash"] != stale[0].detail["current_hash"]

    current = card_now(h, card)
    h.driver.click(user=people.RELEASE_MANAGER, message=current, button=button(current, "Approve"))
    result_message(h, root)
    assert [(e["tool"], e["channel"]) for e in h.workspace.effects()] == [
        ("publish_report", "internal")
    ]


def test_the_high_risk_confirmation_names_what_is_approved(serve_bot, sqlite_url, tmp_path):
    h = serve_bot(sqlite_url, policy_file=policy(tmp_path, TWO_SIGN_OFFS))
    _root, card = start_run(h, PUBLISH)
    approve = next(
        e
        for b in card.blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == ActionId.APPROVE
    )
    text = approve["confirm"]["text"]["text"]
    assert text.startswith("Approve publish_report, version ") and "path=reports/weekly.md" in text
    assert "channel=public" in text and "version " in text


def test_a_value_without_a_version_is_refused(serve_bot, sqlite_url, tmp_path):
    """A click crafted (or left over from an old card) without the version it was made on."""
    h = serve_bot(sqlite_url, policy_file=policy(tmp_path, TWO_SIGN_OFFS))
    _root, card = start_run(h, PUBLISH)
    approve = button(card, "Approve")
    bare = Button(approve.block_id, approve.action_id, approve.value.split(":")[0], approve.text)
    edits = card_now(h, card).edits
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=bare)
    assert ephemeral_for(h, people.RELEASE_MANAGER) == REFUSALS[Refusal.STALE_VERSION]
    h.state.wait_for(lambda: card_now(h, card).edits > edits)  # redrawn with current versions
    with h.bot.db.transaction() as s:
        assert list(s.scalars(select(Decision))) == []


FIFTEEN = (
    "\n".join(
        f'send_external_message {{"recipient": "p{i}@example.com", "text": "note {i}"}}'
        for i in range(14)
    )
    + '\nsend_external_message {"recipient": "p14@example.com", "text": "'
    + "x" * 300
    + ' END"}'
)


def test_a_batch_too_big_for_its_card_is_reviewed_action_by_action(serve_bot, sqlite_url, tmp_path):
    h = serve_bot(sqlite_url, policy_file=policy(tmp_path, TWO_SIGN_OFFS))
    root, card = start_run(h, FIFTEEN)
    labels = [b.text for b in buttons(card)]
    assert "Approve all I may approve" not in labels, "no bulk approval of unseen actions"
    assert "Review all 15 actions" in labels
    assert "do not fit on this card" in json.dumps(card.blocks)

    # A forged Approve all naming every action at its current version is still refused: the
    # card never drew those actions, so no reviewer saw them there.
    request_id = button(card, "Review all 15 actions").value
    view = h.bot.services.engine.approval(request_id)
    forged = Button(
        f"request:{request_id}",
        ActionId.APPROVE_ALL,
        choice_value(request_id, versions_digest(view.approvable)),
        "Approve all I may approve",
    )
    h.driver.click(user=people.SECURITY, message=card, button=forged)
    assert ephemeral_for(h, people.SECURITY) == REFUSALS[Refusal.STALE_VERSION]
    assert any(e.detail.get("decision") == "approve_all" for e in refusals(h))
    assert h.workspace.effects() == []

    modal = open_modal(h, people.SECURITY, card, "Review all 15 actions")
    assert modal.view["callback_id"] == CallbackId.REVIEW_MODAL
    approved: set[str] = set()
    for page in range(3):
        view = h.state.views[modal.id].view
        assert f"Page {page + 1} of 3" in json.dumps(view)
        if page == 2:  # the long text is cut here: the whole of it is one click away
            assert "View full arguments" in json.dumps(view)
        for element in [
            e
            for b in view["blocks"]
            if b["type"] == "actions" and b["block_id"].startswith("review:")
            for e in b["elements"]
            if e["action_id"] == ActionId.APPROVE
        ]:
            h.driver.click_in_view(user=people.SECURITY, view_id=modal.id, element=element)
            approved.add(element["value"])
        h.state.wait_for(
            lambda p=page: (
                json.dumps(h.state.views[modal.id].view).count('"Approved"') == 5
                and f"Page {p + 1} of 3" in json.dumps(h.state.views[modal.id].view)
            )
        )
        nav = next(
            (
                e
                for b in h.state.views[modal.id].view["blocks"]
                if b.get("block_id") == "review_nav"
                for e in b["elements"]
                if e["text"]["text"] == "Next page"
            ),
            None,
        )
        if nav is not None:
            h.driver.click_in_view(user=people.SECURITY, view_id=modal.id, element=nav)
            h.state.wait_for(
                lambda p=page: f"Page {p + 2} of 3" in json.dumps(h.state.views[modal.id].view)
            )
    assert len(approved) == 15
    result_message(h, root)
    assert sorted(e["recipient"] for e in h.workspace.effects()) == sorted(
        f"p{i}@example.com" for i in range(15)
    )


def test_a_tool_redeployed_between_card_and_click_invalidates_the_approval(
    serve_bot, sqlite_url, monkeypatch
):
    """Bound to what people saw: the reviewer approved version X of the tool; the bot now
    runs version Y, so nothing runs and the card says what changed."""
    from agent_runtime.catalog import ToolVersions
    from tests.bot.flows import SEND, button, card_now, start_run

    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    reviewed = h.bot.runtime.catalog.versions("send_external_message")
    monkeypatch.setattr(
        h.bot.runtime.catalog, "versions", lambda _name: ToolVersions("2.0", reviewed.schema)
    )
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert h.bot.settle(timeout=30)
    shown = json.dumps(card_now(h, card).blocks, ensure_ascii=False)
    assert "changed from version unset to 2.0" in shown
    assert h.workspace.effects() == []
