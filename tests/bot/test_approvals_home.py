"""``/approvals`` and the Home tab, end to end over signed HTTP against the Slack sandbox."""

from __future__ import annotations

import json
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from sqlalchemy import select

from bot.blocks.approvals_list import PAGER_BLOCK
from bot.ids import ActionId
from bot.sandbox import people
from bot.sandbox.driver import Button
from store.models import Action, ApprovalRequest, Run
from tests.bot.flows import DELETE, SEND, button, result_message, start_run
from tests.conftest import Harness


def approvals(h: Harness, user: str, text: str = "") -> dict[str, Any]:
    """``/approvals`` by ``user``: the ephemeral answer sent to its response URL."""
    before = len(h.state.responses)
    reply = h.driver.slash_command(
        user=user, channel=people.CHANNEL, text=text, command="/approvals"
    )
    assert reply.status == 200, reply
    return h.state.wait_for(lambda: h.state.responses[before:] and h.state.responses[-1])


def _valid(blocks: list[dict[str, Any]]) -> None:
    for raw in blocks:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()


def _pager(response: dict[str, Any]) -> dict[str, Button]:
    found = {}
    for block in response["blocks"]:
        if block.get("block_id") == PAGER_BLOCK:
            for e in block["elements"]:
                found[e["text"]["text"]] = Button(
                    PAGER_BLOCK, e["action_id"], e.get("value", ""), e["text"]["text"]
                )
    return found


def _mine_and_theirs(response: dict[str, Any]) -> tuple[str, str]:
    """The "Waiting on you" part and the "Your requests" part of an answer."""
    rendered = [json.dumps(b) for b in response["blocks"]]
    cut = next((i for i, b in enumerate(rendered) if "Your requests" in b), len(rendered))
    return "".join(rendered[:cut]), "".join(rendered[cut:])


def _request_ids(h: Harness) -> list[str]:
    """Oldest first, once the bot is idle (each card's place in Slack stored with it)."""
    assert h.bot.settle(timeout=30)
    with h.bot.db.transaction() as s:
        return list(s.scalars(select(ApprovalRequest.id).order_by(ApprovalRequest.created_at)))


def test_a_reviewer_lists_the_pending_card_with_a_link_to_it(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    (request_id,) = _request_ids(h)

    answer = approvals(h, people.RELEASE_MANAGER)

    _valid(answer["blocks"])
    assert answer["response_type"] == "ephemeral"
    waiting, theirs = _mine_and_theirs(answer)
    assert request_id in waiting and "send_external_message" in waiting
    link = f"{h.sandbox.base_url}archives/{card.channel}/p{card.ts.replace('.', '')}"
    expected = f"<{link}?thread_ts={card.thread_ts}&amp;cid={card.channel}|Approval {request_id}>"
    assert expected in waiting
    assert "medium" in waiting and f"<@{people.REQUESTER}>" in waiting and "<!date^" in waiting
    assert theirs == "", "the reviewer asked for nothing"
    assert _pager(answer) == {}, "one page"


def test_an_outsider_sees_an_empty_list_and_nothing_of_others(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    start_run(h, SEND)
    start_run(h, DELETE, user=people.RELEASE_MANAGER)

    before = len(h.state.responses)
    answer = approvals(h, people.OUTSIDER)

    _valid(answer["blocks"])
    everything = json.dumps(h.state.responses[before:]) + json.dumps(h.state.ephemerals)
    with h.bot.db.transaction() as s:
        secrets = [
            *s.scalars(select(ApprovalRequest.id)),
            *s.scalars(select(Run.id)),
            *s.scalars(select(Action.id)),
            *s.scalars(select(Action.tool_name)),
        ]
    assert len(secrets) == 8
    assert [x for x in secrets if x in everything] == []
    assert "Nothing waits on you" in everything
    assert _pager(answer) == {}


def test_the_requester_sees_their_request_but_not_as_theirs_to_decide(serve_bot, sqlite_url):
    """A release manager's own run: they hold an approver role of its tool, but self-approval
    is forbidden for it."""
    h = serve_bot(sqlite_url)
    start_run(h, SEND, user=people.RELEASE_MANAGER)
    (request_id,) = _request_ids(h)

    answer = approvals(h, people.RELEASE_MANAGER)

    _valid(answer["blocks"])
    waiting, theirs = _mine_and_theirs(answer)
    assert request_id not in waiting and "Nothing waits on you" in waiting
    assert request_id in theirs and "send_external_message" in theirs


def test_unknown_subcommand_gets_a_usage_line(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    reply = h.driver.slash_command(
        user=people.RELEASE_MANAGER, channel=people.CHANNEL, text="frobnicate", command="/approvals"
    )
    assert reply.status == 200 and reply.body.startswith("Usage: `/approvals`")
    assert "\n" not in reply.body.strip()
    assert h.state.responses == []


def test_pages_go_beyond_the_first_and_back(serve_bot, sqlite_url, monkeypatch):
    monkeypatch.setattr("bot.approvals.PAGE_SIZE", 2)
    h = serve_bot(sqlite_url)
    for _ in range(3):
        start_run(h, SEND)
    oldest_first = _request_ids(h)

    first = approvals(h, people.SECURITY)
    assert set(_pager(first)) == {"Next page"}
    shown = [r for r in oldest_first if r in json.dumps(first["blocks"])]
    assert shown == oldest_first[:2]

    before = len(h.state.responses)
    h.driver.click_in_ephemeral(
        user=people.SECURITY,
        channel=people.CHANNEL,
        blocks=first["blocks"],
        button=_pager(first)["Next page"],
    )
    second = h.state.wait_for(lambda: h.state.responses[before:] and h.state.responses[-1])
    _valid(second["blocks"])
    assert second["replace_original"] is True
    assert [r for r in oldest_first if r in json.dumps(second["blocks"])] == oldest_first[2:]
    assert set(_pager(second)) == {"First page"}
    assert _pager(second)["First page"].action_id == ActionId.APPROVALS_PAGE

    before = len(h.state.responses)
    h.driver.click_in_ephemeral(
        user=people.SECURITY,
        channel=people.CHANNEL,
        blocks=second["blocks"],
        button=_pager(second)["First page"],
    )
    again = h.state.wait_for(lambda: h.state.responses[before:] and h.state.responses[-1])
    assert [r for r in oldest_first if r in json.dumps(again["blocks"])] == oldest_first[:2]


def test_a_page_turn_is_computed_for_whoever_clicks(serve_bot, sqlite_url, monkeypatch):
    """A page button forwarded to an outsider shows them their own (empty) list."""
    monkeypatch.setattr("bot.approvals.PAGE_SIZE", 1)
    h = serve_bot(sqlite_url)
    for _ in range(2):
        start_run(h, SEND)
    first = approvals(h, people.SECURITY)
    before = len(h.state.responses)
    h.driver.click_in_ephemeral(
        user=people.OUTSIDER,
        channel=people.CHANNEL,
        blocks=first["blocks"],
        button=_pager(first)["Next page"],
    )
    theirs = h.state.wait_for(lambda: h.state.responses[before:] and h.state.responses[-1])
    assert not [r for r in _request_ids(h) if r in json.dumps(theirs)]


def _home(h: Harness, user: str, *, publishes: int = 1) -> dict[str, Any]:
    h.state.wait_for(lambda: h.state.home_publishes.get(user, 0) >= publishes)
    view = h.state.home_of(user)
    assert view is not None
    View(**view).validate_json()
    assert len(view["blocks"]) <= 100
    return view


def _sections(view: dict[str, Any]) -> dict[str, str]:
    """Header text -> everything under it, as JSON."""
    found: dict[str, str] = {}
    current = ""
    for block in view["blocks"]:
        if block["type"] == "header":
            current = block["text"]["text"]
            found[current] = ""
        else:
            found[current] += json.dumps(block)
    return found


def test_opening_the_home_tab_publishes_the_three_sections(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    (request_id,) = _request_ids(h)

    assert h.driver.open_home(user=people.RELEASE_MANAGER).status == 200
    view = _home(h, people.RELEASE_MANAGER)

    sections = _sections(view)
    assert list(sections) == ["Waiting on you", "Your runs", "Recently decided by you"]
    assert request_id in sections["Waiting on you"]
    assert f"p{card.ts.replace('.', '')}" in sections["Waiting on you"]
    h.driver.open_home(user=people.REQUESTER)
    mine = _sections(_home(h, people.REQUESTER))
    assert request_id not in mine["Waiting on you"]
    with h.bot.db.transaction() as s:
        (run_id,) = s.scalars(select(Run.id))
    assert run_id in mine["Your runs"] and "waiting for approval" in mine["Your runs"]


def test_a_decision_republishes_the_home_of_those_who_opened_it(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    (request_id,) = _request_ids(h)
    h.driver.open_home(user=people.RELEASE_MANAGER)
    h.driver.open_home(user=people.RELEASE_MANAGER_2)
    h.driver.open_home(user=people.GROUP_ONLY)  # a reviewer through the user group only
    assert request_id in _sections(_home(h, people.RELEASE_MANAGER_2))["Waiting on you"]
    assert request_id in _sections(_home(h, people.GROUP_ONLY))["Waiting on you"]
    _home(h, people.RELEASE_MANAGER)

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)

    def decided() -> dict[str, str] | None:
        view = h.state.home_of(people.RELEASE_MANAGER)
        sections = _sections(view) if view else {}
        return sections if request_id in sections.get("Recently decided by you", "") else None

    sections = h.state.wait_for(decided)
    assert request_id not in sections["Waiting on you"]
    assert "approved" in sections["Recently decided by you"]
    other = h.state.wait_for(
        lambda: (
            (v := h.state.home_of(people.RELEASE_MANAGER_2))
            and request_id not in _sections(v)["Waiting on you"]
            and v
        )
    )
    View(**other).validate_json()
    grouped = h.state.wait_for(
        lambda: (
            (v := h.state.home_of(people.GROUP_ONLY))
            and request_id not in _sections(v)["Waiting on you"]
            and v
        )
    )
    View(**grouped).validate_json()
    assert h.bot.settle(timeout=30)
    assert people.SECURITY not in h.state.home_publishes, "never opened it: not published"
    assert people.REQUESTER not in h.state.home_publishes
