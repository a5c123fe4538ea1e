"""A run paused on its first card, for requests to be thrown at."""

from __future__ import annotations

import pytest

from tests.bot.flows import SEND, start_run


@pytest.fixture
def paused(serve_bot, sqlite_url):  # type: ignore[no-untyped-def]
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, SEND)
    return h, card
