"""Every kind of interrupt through Slack: edit, respond, custom reviews, per-call, subagents."""

from __future__ import annotations

import html
import json

from langchain_core.messages import ToolMessage

from agent_runtime.authorization import Refusal
from bot.errors import REFUSALS
from bot.sandbox import people
from bot.sandbox.driver import buttons
from tests.bot.flows import (
    PUBLISH,
    button,
    card_now,
    ephemeral_for,
    open_modal,
    result_message,
    start_run,
)

SEND = 'send_external_message {"recipient": "partner@example.com", "text": "Release is out"}'
DELETE = 'delete_project_file {"path": "notes/old.txt"}'
ENV_CHANGE = 'replace_text_file {"path": "config/app.env", "content": "FEATURE_FLAG=on\\n"}'
ASK = 'ask_user {"question": "Which version should I ship?"}'
PER_CALL = "agent_runtime.agents.change_request:build_per_call_agent"


def effects(h):  # type: ignore[no-untyped-def]
    return [e["tool"] for e in h.workspace.effects()]


def test_edit_modal_errors_inline_then_the_run_can_still_be_approved(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, PUBLISH)
    modal = open_modal(h, people.RELEASE_MANAGER, card, "Edit")
    kinds = {
        b["block_id"]: b["element"]["type"] for b in modal.view["blocks"] if b["type"] == "input"
    }
    assert kinds == {
        "arg:path": "plain_text_input",
        "arg:channel": "static_select",
        "arg:notify_subscribers": "radio_buttons",
    }

    bad = h.driver.submit_view(
        user=people.RELEASE_MANAGER, view_id=modal.id, values={"arg:path": {"value": ""}}
    )
    assert bad.json()["response_action"] == "errors"
    assert "arg:path" in bad.json()["errors"]

    internal = {"type": "static_select", "selected_option": {"value": '"internal"'}}
    good = h.driver.submit_view(
        user=people.RELEASE_MANAGER, view_id=modal.id, values={"arg:channel": {"value": internal}}
    )
    assert good.status == 200 and good.body == ""
    h.state.wait_for(lambda: "Edited arguments" in json.dumps(card_now(h, card).blocks))
    diff = json.dumps(card_now(h, card).blocks)
    assert '+  \\"channel\\": \\"internal\\"' in diff
    assert effects(h) == [], "publishing needs a second reviewer"

    h.driver.click(user=people.RELEASE_MANAGER_2, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert [(e["tool"], e["channel"]) for e in h.workspace.effects()] == [
        ("publish_report", "internal")
    ]


def test_batch_approve_edit_reject_resumes_once(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, "\n".join([SEND, PUBLISH, DELETE]))
    rows = [b for b in card.blocks if b.get("block_id", "").startswith("action:")]
    assert len(rows) == 3
    approve_send, approve_publish = button(card, "Approve", 0), button(card, "Approve", 1)
    reject_delete, edit_publish = button(card, "Reject", 2), button(card, "Edit", 1)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve_send)
    edit = open_modal(h, people.RELEASE_MANAGER, card, edit_publish)
    internal = {"type": "static_select", "selected_option": {"value": '"internal"'}}
    h.driver.submit_view(
        user=people.RELEASE_MANAGER, view_id=edit.id, values={"arg:channel": {"value": internal}}
    )
    h.state.wait_for(lambda: "Edited arguments" in json.dumps(card_now(h, card).blocks))
    edited = card_now(h, card)  # the captured Approve names the version before the edit
    current = next(b for b in buttons(edited) if b.block_id == approve_publish.block_id)
    h.driver.click(user=people.RELEASE_MANAGER_2, message=edited, button=current)
    h.state.wait_for(lambda: "Approved with edits" in json.dumps(card_now(h, card).blocks))
    assert effects(h) == []
    reject = open_modal(h, people.SECURITY, card, reject_delete)
    h.driver.submit_view(
        user=people.SECURITY, view_id=reject.id, values={"reject_reason": {"reason": "keep"}}
    )
    result_message(h, root)
    assert sorted((e["tool"], e.get("channel") or "") for e in h.workspace.effects()) == [
        ("publish_report", "internal"),
        ("send_external_message", ""),
    ], "the tools run in parallel, so only the set of effects is fixed"
    messages = h.bot.runtime.state(_run_id(h)).values["messages"]
    statuses = {m.name: m.status for m in messages if isinstance(m, ToolMessage)}
    assert statuses == {
        "send_external_message": "success",
        "publish_report": "success",
        "delete_project_file": "error",
    }


def _run_id(h) -> str:  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from store.models import Run

    with h.bot.db.transaction() as s:
        return s.scalars(select(Run.id)).one()


def test_respond_answers_an_ask_the_human_tool(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, ASK)
    assert [b.text for b in buttons(card)] == ["Respond", "Cancel run"]
    modal = open_modal(h, people.REQUESTER, card, "Respond")
    assert "Which version should I ship?" in json.dumps(modal.view)
    h.driver.submit_view(
        user=people.REQUESTER, view_id=modal.id, values={"respond_answer": {"answer": "Ship 2.1"}}
    )
    assert "Ship 2.1" in result_message(h, root).text


def test_custom_review_of_env_file_shows_kind_and_preview_then_edit(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, ENV_CHANGE)
    shown = json.dumps(card.blocks)
    assert "sensitive_file_change" in shown and "+FEATURE_FLAG=on" in shown
    assert [b.text for b in buttons(card)] == ["Approve", "Edit", "Reject", "Cancel run"]
    modal = open_modal(h, people.RELEASE_MANAGER, card, "Edit")
    h.driver.submit_view(
        user=people.RELEASE_MANAGER,
        view_id=modal.id,
        values={"arg:content": {"value": "FEATURE_FLAG=beta\n"}},
    )
    result_message(h, root)
    assert (h.workspace.root / "config/app.env").read_text() == "FEATURE_FLAG=beta\n"


def test_custom_review_reject_and_approve(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, ENV_CHANGE)
    modal = open_modal(h, people.RELEASE_MANAGER, card, "Reject")
    h.driver.submit_view(
        user=people.RELEASE_MANAGER,
        view_id=modal.id,
        values={"reject_reason": {"reason": "freeze"}},
    )
    assert "freeze" in result_message(h, root).text
    assert (h.workspace.root / "config/app.env").read_text() == "FEATURE_FLAG=off\n"

    root2, card2 = start_run(h, ENV_CHANGE)
    h.driver.click(user=people.RELEASE_MANAGER, message=card2, button=button(card2, "Approve"))
    result_message(h, root2)
    assert (h.workspace.root / "config/app.env").read_text() == "FEATURE_FLAG=on\n"


def test_per_call_agent_one_card_per_call(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url, agent=PER_CALL)
    root, _first = start_run(h, f"{SEND}\n{DELETE}")
    cards = h.state.wait_for(
        lambda: (
            (c := [m for m in h.state.thread(people.CHANNEL, root.ts) if buttons(m)])
            and len(c) == 2
            and c
        )
    )
    for card in cards:
        h.driver.click(user=people.SECURITY, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert sorted(effects(h)) == ["delete_project_file", "send_external_message"]


def test_subagent_interrupt_says_which_subagent(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    task = {"description": SEND, "subagent_type": "release-coordinator"}
    root, card = start_run(h, "task " + json.dumps(task))
    assert "from subagent `release-coordinator`" in json.dumps(card.blocks)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert effects(h) == ["send_external_message"]


def test_view_full_arguments_pages_through_a_huge_value(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    text = "".join(f"line {i} <!channel> & more\n" for i in range(4000))
    args = {"recipient": "a@example.com", "text": text}
    _root, card = start_run(h, "send_external_message " + json.dumps(args))
    modal = open_modal(h, people.OUTSIDER, card, "View full arguments")
    pages = [modal.view]
    while nxt := [
        e
        for b in pages[-1]["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["text"]["text"] == "Next page"
    ]:
        shown_before = h.state.views[modal.id].view
        h.driver.click_in_view(user=people.OUTSIDER, view_id=modal.id, element=nxt[0])
        pages.append(
            h.state.wait_for(
                lambda before=shown_before: (v := h.state.views[modal.id].view) is not before and v
            )
        )
    assert len(pages) > 1
    code = "".join(
        b["text"]["text"].strip("`")
        for p in pages
        for b in p["blocks"]
        if b["type"] == "section" and b["text"]["text"].startswith("```")
    )
    assert json.loads(html.unescape(code)) == args, "nothing is lost across pages"
    assert "<!channel>" not in json.dumps(pages)


def test_approve_all_approves_what_the_reviewer_may_and_leaves_the_rest(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, "\n".join([SEND, PUBLISH, DELETE]))
    approve_all = button(card, "Approve all I may approve")
    assert "confirm" in json.dumps(card.blocks), "high-risk approvals ask for confirmation"

    h.driver.click(user=people.SECURITY, message=card, button=approve_all)
    note = h.state.wait_for(lambda: h.state.ephemerals_for(people.SECURITY))[-1].text
    assert note.startswith("You approved 2 action(s); 1 need another reviewer")
    h.state.wait_for(lambda: json.dumps(card_now(h, card).blocks).count("approved at") == 2)
    assert effects(h) == []

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=approve_all)
    stale = ephemeral_for(h, people.RELEASE_MANAGER)
    assert stale == REFUSALS[Refusal.STALE_VERSION], "the button covered a card that changed"
    assert "1 of 2 approvals" not in json.dumps(card_now(h, card).blocks)

    # Only one action is left open, so the card now offers no bulk button: approve it as shown.
    current = card_now(h, card)
    assert [b.text for b in buttons(current)].count("Approve all I may approve") == 0
    h.driver.click(user=people.RELEASE_MANAGER, message=current, button=button(current, "Approve"))
    h.state.wait_for(lambda: "1 of 2 approvals" in json.dumps(card_now(h, card).blocks))
    current = card_now(h, card)
    h.driver.click(
        user=people.RELEASE_MANAGER_2, message=current, button=button(current, "Approve")
    )
    result_message(h, root)
    assert sorted(effects(h)) == ["delete_project_file", "publish_report", "send_external_message"]
