"""The bot's Prometheus metrics, on a registry of its own (one per bot, so two bots in one
process, as in tests, never mix their figures).

Every counter is declared up front, so a scrape shows it at 0 before its first increment; the
gauges are read from the store and the pools at each scrape."""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import perf_counter

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from store.db import Database
from store.inbox import InboxRepository
from store.models import utcnow
from store.monitoring import MonitoringQueries

logger = logging.getLogger(__name__)
PREFIX = "approval_bot"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RISKS = ("none", "low", "medium", "high")

COUNTERS = {
    "http_requests": "Requests received on POST /slack/events.",
    "malformed_requests": "Signed Slack requests refused as malformed.",
    "clicks": "Button clicks and modal submissions taken.",
    "slash_commands": "Slash commands taken.",
    "decisions_recorded": "Decisions recorded.",
    "decisions_refused": "Decisions refused (not allowed, stale card, closed approval).",
    "runs_cancelled": "Runs cancelled from Slack.",
    "cancels_refused": "Cancel clicks refused.",
    "inbox_stored": "Clicks and submissions stored in the decision inbox before their ack.",
    "inbox_write_failures": "Clicks the decision inbox could not store (answered as busy).",
    "busy_refusals": "Clicks and commands answered as busy.",
    "drop_notices_lost": "Busy or failure notices that could not be sent.",
    "inbox_unreadable": "Inbox items whose payload could not be read.",
    "inbox_given_up": "Inbox items given up after failures.",
    "inbox_lease_lost": "Inbox items taken over by another worker while being worked on.",
    "inbox_waits_for_acks": "Inbox items whose work waited while a burst of requests was acked.",
}
FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SLOW = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

clicked_at: contextvars.ContextVar[dt.datetime | None] = contextvars.ContextVar(
    "clicked_at", default=None
)
"""When the click being worked on in this context was stored (set by the inbox worker), so a
resume it triggers can be timed from the click."""


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._counters = {
            name: Counter(f"{PREFIX}_{name}", text, registry=self.registry)
            for name, text in COUNTERS.items()
        }
        self.ack_seconds = Histogram(
            f"{PREFIX}_ack_seconds",
            "From a Slack request's arrival to its ack, by mode (http, socket).",
            ["mode"],
            buckets=FAST,
            registry=self.registry,
        )
        self.click_to_resume_seconds = Histogram(
            f"{PREFIX}_click_to_resume_seconds",
            "From a stored click to the start of the resume it allowed.",
            buckets=SLOW,
            registry=self.registry,
        )
        self.resume_seconds = Histogram(
            f"{PREFIX}_resume_seconds",
            "One resume of an agent's thread, checks included, by outcome.",
            ["outcome"],
            buckets=SLOW,
            registry=self.registry,
        )
        self.slack_api_seconds = Histogram(
            f"{PREFIX}_slack_api_seconds",
            "Slack Web API calls by method and error ('none' when it succeeded).",
            ["method", "error"],
            buckets=FAST,
            registry=self.registry,
        )

    def inc(self, name: str, amount: int = 1) -> None:
        """Count ``amount`` of a declared counter (an undeclared name is a bug: KeyError)."""
        self._counters[name].inc(amount)

    def count(self, name: str) -> float:
        """A counter's value (for tests and the demo's summary)."""
        self._counters[name]  # an undeclared name is a KeyError here too
        return self.registry.get_sample_value(f"{PREFIX}_{name}_total") or 0.0

    @contextmanager
    def ack_timer(self, mode: str) -> Iterator[None]:
        start = perf_counter()
        try:
            yield
        finally:
            self.ack_seconds.labels(mode=mode).observe(perf_counter() - start)

    def slack_call(self, method: str, error: str | None, seconds: float) -> None:
        self.slack_api_seconds.labels(method=method, error=error or "none").observe(seconds)

    def resume_started(self, request_id: str) -> None:
        """Timed from the click when a click started this resume (not a sweep or a restart)."""
        at = clicked_at.get()
        if at is not None:
            self.click_to_resume_seconds.observe(max((utcnow() - at).total_seconds(), 0.0))

    def resume_finished(self, request_id: str, *, seconds: float, outcome: str) -> None:
        self.resume_seconds.labels(outcome=outcome).observe(seconds)

    def watch(self, collector: Collector) -> None:
        self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class BotGauges(Collector):
    """Read at each scrape: approvals waiting by risk, the oldest one's age, the decision
    inbox's depth, and the bot's own queues. A store that cannot be read leaves its gauges out
    (``/healthz`` reports it); the scrape still answers."""

    def __init__(
        self,
        *,
        db: Database,
        in_flight: Callable[[], int],
        writer_waiting: Callable[[], int],
    ) -> None:
        self.db = db
        self.in_flight = in_flight
        self.writer_waiting = writer_waiting

    def describe(self) -> list[Metric]:
        return []  # read only when scraped, never at registration

    def collect(self) -> Iterator[Metric]:
        yield _gauge(
            "worker_tasks_in_flight",
            "Tasks running on the bot's worker pool.",
            float(self.in_flight()),
        )
        yield _gauge(
            "inbox_writer_waiting",
            "Clicks waiting to be stored before their ack.",
            float(self.writer_waiting()),
        )
        try:
            with self.db.transaction() as s:
                depth = InboxRepository(s).depth()
                pending = MonitoringQueries(s).pending()
        except Exception:
            logger.exception("metrics: the store could not be read")
            return
        by_risk = GaugeMetricFamily(
            f"{PREFIX}_pending_approvals",
            "Actions waiting for a decision in pending approvals, by risk.",
            labels=["risk"],
        )
        for risk in sorted(set(RISKS) | set(pending.by_risk)):
            by_risk.add_metric([risk], float(pending.by_risk.get(risk, 0)))
        yield by_risk
        yield _gauge(
            "oldest_pending_seconds", "Age of the oldest pending approval.", pending.oldest_seconds
        )
        inbox = GaugeMetricFamily(
            f"{PREFIX}_inbox_items", "Decision inbox items by status.", labels=["status"]
        )
        for status in ("queued", "claimed", "failed"):
            inbox.add_metric([status], depth.get(f"inbox_{status}", 0.0))
        yield inbox
        yield _gauge(
            "inbox_oldest_queued_seconds",
            "Age of the oldest queued inbox item.",
            depth.get("inbox_oldest_queued_seconds", 0.0),
        )


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", text, value=value)
