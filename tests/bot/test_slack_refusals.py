"""Which of Slack's answers end the tries of a post for good, and which may pass: answers read
by slack_sdk itself, from a local HTTP server answering as Slack (or a gateway) would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack_refusals import refused_for_good
from tests.bot.slack_answers import answering


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    with answering() as url:
        yield url


def _refusal(api: str, answer: str) -> SlackApiError:
    client = WebClient(token="xoxb-test", base_url=api, retry_handlers=[])
    with pytest.raises(SlackApiError) as raised:
        client.api_call(answer)
    return raised.value


@pytest.mark.parametrize(
    "error",
    ["is_archived", "not_in_channel", "channel_not_found", "restricted_action_thread_locked"],
)
def test_a_channel_that_will_never_take_the_post_ends_its_tries(api, error):
    refused = _refusal(api, f"slack.{error}")
    assert refused_for_good(refused) == error
    assert refused_for_good(refused, direct=True) == error


@pytest.mark.parametrize(
    "error", ["user_disabled", "user_not_found", "cannot_dm_bot", "missing_scope", "invalid_auth"]
)
def test_a_direct_message_slack_will_never_take_ends_its_tries(api, error):
    refused = _refusal(api, f"slack.{error}")
    assert refused_for_good(refused, direct=True) == error
    assert refused_for_good(refused) is None


@pytest.mark.parametrize(
    "error", ["ratelimited", "rate_limited", "fatal_error", "internal_error", "service_unavailable"]
)
def test_what_may_pass_is_tried_again(api, error):
    refused = _refusal(api, f"slack.{error}")
    assert refused_for_good(refused) is None
    assert refused_for_good(refused, direct=True) is None


@pytest.mark.parametrize(
    "answer", ["gateway.down", "proxy.page", "limit.now", "down.user_not_found"]
)
def test_a_gateway_s_page_a_429_or_a_5xx_may_pass(api, answer):
    """slack_sdk turns a page it cannot read into an error of its own wording, and a 429
    into Slack's rate-limit error; an answer with a status of trouble is not Slack's final
    word, whatever error it names."""
    refused = _refusal(api, answer)
    assert refused_for_good(refused, direct=True) is None
    assert refused_for_good(refused) is None


def test_no_answer_at_all_may_pass():
    assert refused_for_good(TimeoutError("no answer")) is None
    assert refused_for_good(ConnectionResetError()) is None
