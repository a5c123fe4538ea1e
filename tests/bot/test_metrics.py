"""``/metrics``, ``/healthz`` and ``/readyz`` as a scraper and a probe read them, over HTTP."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError

from bot.sandbox import people
from store.inbox_models import InboxKind
from tests.bot.flows import SEND, button, result_message, start_run
from tests.bot.scrape import sample, scrape, status

COUNTERS = ("clicks", "decisions_recorded", "inbox_stored", "inbox_given_up", "busy_refusals")
HISTOGRAMS = ("ack_seconds", "click_to_resume_seconds", "resume_seconds", "slack_api_seconds")
GAUGES = ("pending_approvals", "oldest_pending_seconds", "inbox_items", "worker_tasks_in_flight")


def test_a_fresh_bot_shows_every_family_with_its_type(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    families = scrape(h.url)
    for name in COUNTERS:
        assert families[f"approval_bot_{name}"].type == "counter"
        assert sample(families, name, "_total") == 0.0  # there before its first increment
    for name in HISTOGRAMS:
        assert families[f"approval_bot_{name}"].type == "histogram"
    for name in GAUGES:
        assert families[f"approval_bot_{name}"].type == "gauge"
    for risk in ("none", "low", "medium", "high"):
        assert sample(families, "pending_approvals", risk=risk) == 0.0
    assert families["process_cpu_seconds"].type == "counter"
    assert families["process_resident_memory_bytes"].type == "gauge"


def test_an_approval_moves_the_counters_histograms_and_gauges(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    root, card = start_run(h, SEND)
    waiting = scrape(h.url)
    assert sample(waiting, "pending_approvals", risk="medium") == 1.0
    assert sample(waiting, "oldest_pending_seconds") >= 0.0
    assert sample(waiting, "slack_api_seconds", "_count", method="chat.postMessage", error="none")

    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert h.bot.settle(timeout=30)
    done = scrape(h.url)
    assert sample(done, "clicks", "_total") == 1.0
    assert sample(done, "decisions_recorded", "_total") == 1.0
    assert sample(done, "ack_seconds", "_count", mode="http") >= 2.0  # the command, the click
    assert sample(done, "click_to_resume_seconds", "_count") == 1.0
    assert sample(done, "resume_seconds", "_count", outcome="continued") == 1.0
    assert sample(done, "pending_approvals", risk="medium") == 0.0
    assert sample(done, "oldest_pending_seconds") == 0.0


def test_slack_errors_are_counted_by_method_and_error(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    with pytest.raises(SlackApiError):
        h.bot.services.slack(None).chat_update(channel=people.CHANNEL, ts="1.000001", text="hi")
    families = scrape(h.url)
    failed = {"method": "chat.update", "error": "message_not_found"}
    assert sample(families, "slack_api_seconds", "_count", **failed) == 1.0


def test_stored_clicks_waiting_show_in_the_inbox_gauges(serve_bot, sqlite_url):
    h = serve_bot(sqlite_url)
    h.bot.inbox.stop(timeout=30)  # no worker: the click waits
    assert h.bot.services.store(InboxKind.APPROVE, {"who": "nobody"})
    families = scrape(h.url)
    assert sample(families, "inbox_items", status="queued") == 1.0
    assert sample(families, "inbox_items", status="failed") == 0.0
    assert sample(families, "inbox_oldest_queued_seconds") >= 0.0


def test_health_and_readiness_and_the_drain(serve_bot, sqlite_url, monkeypatch):
    h = serve_bot(sqlite_url)
    assert status(h.url + "/healthz") == (200, b"ok\n")
    assert status(h.url + "/readyz") == (200, b"ok\n")
    h.bot.stopping.set()  # what a SIGTERM does first
    assert status(h.url + "/readyz") == (503, b"draining\n")
    assert status(h.url + "/healthz") == (200, b"ok\n")  # alive: let it finish, do not kill it

    def unreachable() -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(h.bot.db, "ping", unreachable)
    assert status(h.url + "/healthz") == (503, b"database unreachable\n")
    assert status(h.url + "/metrics")[0] == 200  # a scrape still answers
