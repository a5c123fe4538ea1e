"""A Slack Web API client that times every call, by method and error, for ``/metrics``."""

from __future__ import annotations

import re
from collections.abc import Callable
from time import perf_counter
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from bot.slack_refusals import NOT_SLACKS

Observe = Callable[[str, "str | None", float], None]


class TimedWebClient(WebClient):
    """Every method of the SDK goes through ``api_call``: one place to time them all. The
    error label is Slack's error code (``ratelimited``, ``channel_not_found``), ``not_json``
    for an answer slack_sdk could not read (a gateway's page), or the exception's type for a
    failure below the API (a timeout, a refused connection)."""

    def __init__(self, *, observe: Observe, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observe = observe

    def api_call(self, api_method: str, **kwargs: Any) -> SlackResponse:
        start = perf_counter()
        error: str | None = None
        try:
            return super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            error = _label(exc)
            raise
        except Exception as exc:
            error = type(exc).__name__
            raise
        finally:
            self.observe(api_method, error, perf_counter() - start)


_SLACKS_WORD = re.compile(r"[a-z0-9_.]{1,80}")


def _label(exc: SlackApiError) -> str:
    """Slack's error code; never the text of a page (one label each would grow ``/metrics``
    without end)."""
    error = str(exc.response.get("error") or "unknown_error")
    if error.startswith(NOT_SLACKS):
        return "not_json"
    return error if _SLACKS_WORD.fullmatch(error) else "unexpected_answer"
