"""Wiring: settings -> store, graph, engine, Slack clients (``bot.slack_side``), worker pool and
the Bolt app."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slack_bolt import App

from agent_runtime.catalog import ToolCatalog
from agent_runtime.encryption import verify_key
from agent_runtime.engine import ApprovalEngine
from agent_runtime.gate import EffectGate
from agent_runtime.kill_switch import KillSwitch
from agent_runtime.policy import load_policy
from agent_runtime.runtime import AgentRuntime
from agent_runtime.sweeper import Maintenance
from bot.ack_first import AckFirst
from bot.agent_wiring import open_agent
from bot.directory import UsergroupDirectory
from bot.errors import NOT_INSTALLED
from bot.executor import BoundedExecutor, ListenerPool
from bot.handoff import Handoff
from bot.home import HomeRefreshingNotifier, HomeTab
from bot.inbox import InboxWorkers
from bot.inbox_writer import InboxWriter
from bot.listeners import actions, commands, events, views
from bot.listeners.payloads import PayloadCheck
from bot.metrics import BotGauges, Metrics
from bot.services import BotServices, install
from bot.settings import Settings
from bot.slack_side import SlackSide, installed_workspaces, single_workspace
from bot.workspaces import group_clients
from store.db import Database
from store.migrate import prepare
from store.models import utcnow

logger = logging.getLogger(__name__)


@dataclass
class Bot:
    settings: Settings
    db: Database
    runtime: AgentRuntime
    services: BotServices
    listeners: ListenerPool
    app: App
    engine: ApprovalEngine
    maintenance: Maintenance
    inbox: InboxWorkers

    stopping: threading.Event = field(default_factory=threading.Event)
    """Set once the process stops taking work: readiness fails from then on."""

    @property
    def metrics(self) -> Metrics:
        return self.services.metrics

    def store_answers(self) -> bool:
        try:
            self.db.ping()
        except Exception:
            logger.exception("health check: database unreachable")
            return False
        return True

    def draining(self) -> bool:
        return self.stopping.is_set()

    def start_background(self) -> None:
        """Finish what a dead process left, then keep sweeping and reconciling."""
        try:
            self.engine.reconcile()
        except Exception:
            logger.exception("start-up reconciliation failed; the background loop will retry")
        self.maintenance.start()

    def settle(self, *, timeout: float) -> bool:
        """Wait until listeners have finished what they do after their ack (which may hand
        work to the pool or the inbox), then until the inbox and the pools are idle; ``False``
        if that took too long."""
        deadline = time.monotonic() + timeout
        for listeners in (self.listeners, self.services.after_acks):
            if not listeners.wait_idle(timeout=max(0.0, deadline - time.monotonic())):
                return False
        if self.inbox.running and not self.inbox.wait_idle(
            timeout=max(0.0, deadline - time.monotonic())
        ):
            return False
        for pool in (self.services.executor, self.services.notices):
            if not pool.wait_idle(timeout=max(0.0, deadline - time.monotonic())):
                return False
        home = self.services.home
        return home is None or home.wait_idle(timeout=max(0.0, deadline - time.monotonic()))

    def close(self, *, drain_seconds: float = 30.0) -> None:
        """Finish in-flight work (listeners, resumes, runs) before closing the store."""
        self.stopping.set()
        self.maintenance.stop()
        if not self.settle(timeout=drain_seconds):
            logger.warning("stopping with %d tasks still running", self.services.executor.in_flight)
        self.inbox.stop(timeout=drain_seconds)
        self.listeners.shutdown(wait=False)
        self.services.after_acks.shutdown(wait=False)
        self.services.writer.close()
        self.services.executor.shutdown(wait=False)
        self.services.notices.shutdown(wait=False)
        if self.services.home is not None:
            self.services.home.shutdown()
        self.runtime.close()
        self.db.dispose()


def bolt_app(settings: Settings, slack: SlackSide, *, http: bool, listeners: ListenerPool) -> App:
    """With one bot token, Bolt checks it once at start; installing by OAuth, Bolt serves the
    install pages and authorizes each request with its team's stored token. Bolt runs each
    listener in ``listeners`` and answers once it acked; listeners hand what waits on Slack
    after their ack to another pool (``BotServices.after_ack``), so these threads stay free.

    Not ``process_before_response``: listeners run in the HTTP threads then, which answers a
    lone click up to 10 ms sooner (Bolt looks for the ack every 10 ms), but under a burst of
    200 clicks the slowest acks came 1.4 to 2 times later (see BENCHMARKS.md)."""
    secret = settings.slack_signing_secret
    return App(
        client=slack.client,
        signing_secret=secret.get_secret_value() if secret else "",
        request_verification_enabled=http,
        process_before_response=False,
        token_verification_enabled=True,  # one token: one auth.test now, reused by every request
        oauth_settings=slack.oauth,
        user_facing_authorize_error_message=NOT_INSTALLED if slack.oauth else None,
        listener_executor=listeners,
    )


def build_bot(
    settings: Settings, *, http: bool = True, clock: Callable[[], dt.datetime] = utcnow
) -> Bot:
    """``http=False`` (Socket Mode) needs no signing secret: Slack's socket is authenticated."""
    settings.require_slack(http=http)
    policy = load_policy(settings.policy_file)
    metrics = Metrics()
    single = None if settings.multi_workspace else single_workspace(settings, metrics)
    db = Database(
        settings.database_url, pool_size=settings.db_pool_size, audit_key=settings.audit_hmac_key()
    )
    prepare(db)
    key = settings.encryption_key()
    verify_key(db, key)
    slack = single or installed_workspaces(settings, metrics, db=db, key=key)
    notifier = HomeRefreshingNotifier(slack.workspaces)
    gate = EffectGate(db=db, policy=policy, catalog=ToolCatalog(), notifier=notifier)
    runtime = open_agent(settings, policy=policy, gate=gate, key=key)
    one = slack.single
    directory = UsergroupDirectory(
        (lambda _group: one) if one is not None else group_clients(policy, slack.workspaces)
    )
    engine = ApprovalEngine(
        db=db,
        runtime=runtime,
        policy=policy,
        notifier=notifier,
        usergroup_members=directory.members,
        clock=clock,
        lease=dt.timedelta(seconds=settings.claim_lease_seconds),
        observer=metrics,
        card_retry_after=dt.timedelta(seconds=settings.card_retry_seconds),
        resuming_card_after=dt.timedelta(seconds=settings.resuming_card_after_seconds),
        rounds_every=dt.timedelta(seconds=settings.maintenance_interval_seconds),
    )
    home = HomeTab(
        workspaces=slack.workspaces, overview=engine.overview, usergroup_members=directory.members
    )
    notifier.watch(home)
    handoff = Handoff()
    services = BotServices(
        engine=engine,
        writer=InboxWriter(db, handoff=handoff),
        handoff=handoff,
        switch=KillSwitch(
            db=db,
            policy=policy,
            notifier=notifier,
            usergroup_members=directory.members,
            clock=clock,
        ),
        metrics=metrics,
        executor=BoundedExecutor(workers=settings.worker_threads, queue=settings.worker_queue),
        workspaces=slack.workspaces,
        directory=directory,
        home=home,
        ack_first=AckFirst(patience=settings.ack_first_seconds),
    )
    listeners = ListenerPool()
    app = bolt_app(settings, slack, http=http, listeners=listeners)
    check = PayloadCheck(services.metrics)
    app.use(check)
    app.error(check.on_error)
    install(app, services)
    metrics.watch(
        BotGauges(
            db=db,
            in_flight=lambda: services.executor.in_flight,
            writer_waiting=services.writer.waiting,
        )
    )
    for group in (commands, actions, views, events):
        group.register(app)
    inbox = InboxWorkers(
        services,
        threads=settings.worker_threads,
        lease=dt.timedelta(seconds=settings.claim_lease_seconds),
    )
    if settings.inbox_workers:
        inbox.start()
    return Bot(
        settings=settings,
        db=db,
        runtime=runtime,
        services=services,
        listeners=listeners,
        app=app,
        engine=engine,
        maintenance=Maintenance(
            [engine.sweep, engine.reconcile], interval=settings.maintenance_interval_seconds
        ),
        inbox=inbox,
    )
