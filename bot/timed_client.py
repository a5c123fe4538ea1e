"""A Slack Web API client that times every call, by method and error, for ``/metrics``."""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

Observe = Callable[[str, "str | None", float], None]


class TimedWebClient(WebClient):
    """Every method of the SDK goes through ``api_call``: one place to time them all. The
    error label is Slack's error code (``ratelimited``, ``channel_not_found``), or the
    exception's type for a failure below the API (a timeout, a refused connection)."""

    def __init__(self, *, observe: Observe, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observe = observe

    def api_call(self, api_method: str, **kwargs: Any) -> SlackResponse:
        start = perf_counter()
        error: str | None = None
        try:
            return super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "unknown_error")
            raise
        except Exception as exc:
            error = type(exc).__name__
            raise
        finally:
            self.observe(api_method, error, perf_counter() - start)
