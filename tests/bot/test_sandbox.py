"""The sandbox refuses what Slack refuses, so tests against it mean something."""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox


@pytest.fixture
def sandbox():
    box = SlackSandbox(users={"U1": "one"}, usergroups={"S1": ["U1"]}).start()
    yield box
    box.stop()


def client(box: SlackSandbox, token: str = SANDBOX_TOKEN) -> WebClient:
    return WebClient(token=token, base_url=box.api_url)


def error_of(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SlackApiError) as err:
        call()
    return err.value.response["error"]


def test_bad_token_is_refused(sandbox):
    assert error_of(lambda: client(sandbox, "xoxb-wrong").auth_test()) == "invalid_auth"


def test_invalid_blocks_are_refused(sandbox):
    too_long = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    unknown = [{"type": "no-such-block"}]
    too_many = [{"type": "divider"}] * 51
    for blocks in (too_long, unknown, too_many):
        call = lambda b=blocks: client(sandbox).chat_postMessage(channel="C1", blocks=b, text="t")  # noqa: E731
        assert error_of(call) == "invalid_blocks"


def test_threads_updates_and_lookups(sandbox):
    c = client(sandbox)
    root = c.chat_postMessage(channel="C1", text="root")
    reply = c.chat_postMessage(channel="C1", text="reply", thread_ts=root["ts"])
    c.chat_update(channel="C1", ts=reply["ts"], text="edited")
    assert [m.text for m in sandbox.state.thread("C1", root["ts"])] == ["edited"]
    assert error_of(lambda: c.chat_update(channel="C1", ts="9.9", text="x")) == "message_not_found"
    assert error_of(lambda: c.chat_postMessage(channel="C1", text="x", thread_ts="9.9")) == (
        "thread_not_found"
    )
    assert c.users_info(user="U1")["user"]["name"] == "one"
    assert c.usergroups_users_list(usergroup="S1")["users"] == ["U1"]


def test_trigger_ids_work_once(sandbox):
    c = client(sandbox)
    view = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "t"},
        "blocks": [{"type": "divider"}],
    }
    trigger = sandbox.state.issue_trigger("U1")
    assert c.views_open(trigger_id=trigger, view=view)["view"]["id"]
    assert error_of(lambda: c.views_open(trigger_id=trigger, view=view)) == "invalid_trigger_id"


def test_a_channel_of_another_workspace_is_not_found_with_this_ones_token(sandbox):
    token = sandbox.add_workspace("T0OTHER", users={}, channels=("C0OTHER",))
    refused = lambda: client(sandbox).chat_postMessage(channel="C0OTHER", text="x")  # noqa: E731
    assert error_of(refused) == "channel_not_found"
    assert client(sandbox, token).chat_postMessage(channel="C0OTHER", text="x")["ok"]
    assert client(sandbox).chat_postMessage(channel="C1", text="anyone's")["ok"]
