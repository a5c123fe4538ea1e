"""Every Slack call timed, by method and by error: the error label is Slack's word, or what
kind of failure it was, never text a gateway or a proxy chose (a label per page would grow
``/metrics`` without end)."""

from __future__ import annotations

import socket

import pytest
from slack_sdk.errors import SlackApiError

from bot.timed_client import TimedWebClient
from tests.bot.slack_answers import answering


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("slack.is_archived", "is_archived"),
        ("down.service_unavailable", "service_unavailable"),
        ("gateway.down", "not_json"),
        ("proxy.page", "not_json"),
        ("limit.now", "ratelimited"),
    ],
)
def test_each_failed_call_is_labelled_by_slack_s_word_or_its_kind(answer, label):
    seen: list[tuple[str, str | None]] = []
    with answering() as api:
        client = TimedWebClient(
            observe=lambda method, error, _s: seen.append((method, error)),
            token="xoxb-test",
            base_url=api,
            retry_handlers=[],
        )
        with pytest.raises(SlackApiError):
            client.api_call(answer)
    assert seen == [(answer, label)]


def test_a_call_that_got_no_answer_is_labelled_by_its_failure():
    with socket.socket() as closed:  # a port just given back: nothing listens on it
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    seen: list[str | None] = []
    client = TimedWebClient(
        observe=lambda _m, error, _s: seen.append(error),
        token="xoxb-test",
        base_url=f"http://127.0.0.1:{port}/api/",
        retry_handlers=[],
        timeout=5,
    )
    with pytest.raises(OSError):
        client.api_call("chat.postMessage")
    assert seen and seen[0] in {"URLError", "ConnectionRefusedError", "TimeoutError"}
