"""Block Kit of ``/approvals`` and the Home tab: snapshots, slack_sdk validation, limits, and
agent text kept inert."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from agent_runtime.listing import Page
from agent_runtime.overview import DecidedRow, Home
from bot.blocks.approvals_list import approvals_list
from bot.blocks.home import home_view
from bot.blocks.links import message_url
from tests.bot.snapshot_files import assert_matches_snapshot
from tests.bot.test_blocks import AT, HOSTILE, LIVE, RUN, action, approval

WORKSPACE = "https://acme.slack.com/"
OURS = r"<@U0ALICE>|<!date\^\d+\^[^|>]*\|[^>]*>|<https://acme\.slack\.com/[^|>]*\|"
"""What the bot itself may make live: its mentions, dates and links to its own workspace."""
FIRST = approval(action(0, risk="high", tool_name="publish_report"), action(1))
SECOND = approval(id="apr_2", card_ts=None)  # its card's place not known yet: no link
DECIDED = DecidedRow(
    request_id="apr_0",
    tool_name="delete_project_file",
    decision="reject",
    at=AT,
    request_status="resolved",
    card_channel="C1",
    card_ts="3.0",
    thread_ts="1.0",
)


def _home(**changes: Any) -> Home:
    base = Home(
        waiting=Page(items=[FIRST, SECOND], next_after=None),
        requested=[],
        runs=[RUN, dataclasses.replace(RUN, id="run_0", status="completed")],
        decided=[DECIDED],
        limit=50,
    )
    return dataclasses.replace(base, **changes)


LISTS = {
    "first_page": approvals_list(
        Page(items=[FIRST], next_after="apr_1"),
        requested=[approval(id="apr_9")],
        workspace_url=WORKSPACE,
    ),
    "next_page": approvals_list(Page(items=[SECOND], next_after=None), requested=[], after="apr_1"),
    "empty": approvals_list(Page(items=[], next_after=None), requested=[]),
}


def _valid_blocks(blocks: list[dict[str, Any]]) -> None:
    for raw in blocks:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()


def _snapshot(name: str, rendered_obj: dict[str, Any]) -> None:
    assert_matches_snapshot(rendered_obj, f"{name}")


@pytest.mark.parametrize("name", sorted(LISTS))
def test_approvals_list_matches_snapshot_and_validates(name):
    message = LISTS[name]
    assert message["text"] and len(message["blocks"]) <= 50
    _valid_blocks(message["blocks"])
    _snapshot(f"approvals_list_{name}", message)


def test_home_tab_matches_snapshot_and_validates():
    view = home_view(_home(), workspace_url=WORKSPACE)
    View(**view).validate_json()
    _valid_blocks(view["blocks"])
    _snapshot("home_tab", view)


def test_a_full_home_tab_stays_within_100_blocks_and_points_to_approvals():
    many = [dataclasses.replace(FIRST, id=f"apr_{i}") for i in range(50)]
    home = _home(
        waiting=Page(items=many, next_after="apr_49"),
        runs=[dataclasses.replace(RUN, id=f"run_{i}") for i in range(50)],
        decided=[dataclasses.replace(DECIDED, request_id=f"apr_{i}") for i in range(50)],
    )
    view = home_view(home, workspace_url=WORKSPACE)
    View(**view).validate_json()
    assert len(view["blocks"]) <= 100
    rows, section = Counter[str](), ""
    for block in view["blocks"]:
        if block["type"] == "header":
            section = block["text"]["text"]
        rows[section] += block["type"] == "section"
    assert rows == {"Waiting on you": 15, "Your runs": 10, "Recently decided by you": 10}
    rendered = json.dumps(view, ensure_ascii=False)
    assert rendered.count("more — use `/approvals`") == 3
    assert "and 35+ more" in rendered and "and 40+ more" in rendered


def test_agent_text_is_inert_in_the_list_and_the_home_tab():
    hostile = approval(
        action(tool_name=HOSTILE, risk=HOSTILE), run=dataclasses.replace(RUN, thread_ts=HOSTILE)
    )
    run = dataclasses.replace(RUN, request_text=HOSTILE, status=HOSTILE)
    decided = dataclasses.replace(DECIDED, tool_name=HOSTILE, decision=HOSTILE)
    page = Page(items=[hostile], next_after=None)
    home = _home(waiting=page, runs=[run], decided=[decided])
    outputs = [
        approvals_list(page, requested=[hostile], workspace_url="https://x.com/<!channel>"),
        home_view(home, workspace_url=WORKSPACE),
    ]
    for output in outputs:
        _valid_blocks(output["blocks"])
        for text in re.findall(r'"text": "((?:[^"\\]|\\.)*)"', json.dumps(output)):
            stripped = re.sub(OURS, "", text)
            assert not LIVE.search(stripped), text


def test_card_links_are_built_only_from_well_formed_ids():
    assert (
        message_url(WORKSPACE, channel="C1", ts="2.0", thread_ts="1.0")
        == "https://acme.slack.com/archives/C1/p20?thread_ts=1.0&cid=C1"
    )
    assert message_url(WORKSPACE, channel="C1", ts="1.0", thread_ts="1.0") == (
        "https://acme.slack.com/archives/C1/p10"
    )
    assert message_url("https://x.com/<!channel>", channel="C1", ts="2.0") is None
    assert message_url(WORKSPACE, channel="C1|evil", ts="2.0") is None
    assert message_url(WORKSPACE, channel="C1", ts="2.0>") is None
    assert message_url(None, channel="C1", ts="2.0") is None
