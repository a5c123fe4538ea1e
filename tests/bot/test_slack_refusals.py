"""Which of Slack's answers end the tries of a post for good, and which may pass."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError

from bot.slack_refusals import refused_for_good


class _NotJson:
    def get(self, _key: str) -> object:
        raise ValueError("the answer was an HTML error page")


def _answer(error: str) -> SlackApiError:
    return SlackApiError("refused", {"ok": False, "error": error})


@pytest.mark.parametrize(
    "error",
    ["is_archived", "not_in_channel", "channel_not_found", "restricted_action_thread_locked"],
)
def test_a_channel_that_will_never_take_the_post_ends_its_tries(error):
    assert refused_for_good(_answer(error)) == error
    assert refused_for_good(_answer(error), direct=True) == error


@pytest.mark.parametrize(
    "error", ["user_disabled", "user_not_found", "cannot_dm_bot", "missing_scope", "invalid_auth"]
)
def test_a_direct_message_slack_will_never_take_ends_its_tries(error):
    assert refused_for_good(_answer(error), direct=True) == error
    assert refused_for_good(_answer(error)) is None


@pytest.mark.parametrize(
    "error", ["ratelimited", "fatal_error", "internal_error", "service_unavailable", ""]
)
def test_what_may_pass_is_tried_again(error):
    assert refused_for_good(_answer(error)) is None
    assert refused_for_good(_answer(error), direct=True) is None


def test_an_answer_that_is_not_slacks_or_no_answer_may_pass():
    assert refused_for_good(SlackApiError("refused", _NotJson())) is None
    assert refused_for_good(TimeoutError("no answer")) is None
    assert refused_for_good(ConnectionResetError()) is None
