"""Wiring: settings -> store, graph, engine, Slack client, worker pool and the Bolt app."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.error import URLError

from slack_bolt import App
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

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
from bot.installations import InstallationStore, oauth_settings
from bot.listeners import actions, commands, events, views
from bot.listeners.payloads import PayloadCheck
from bot.metrics import BotGauges, Metrics
from bot.services import BotServices, install
from bot.settings import ConfigError, Settings
from bot.timed_client import TimedWebClient
from bot.token_rotation import StoreTokenRotator, refresher_for
from bot.workspaces import InstalledWorkspaces, SingleWorkspace, Workspaces, group_clients
from store.db import Database
from store.migrate import prepare
from store.models import utcnow

logger = logging.getLogger(__name__)
LISTENER_THREADS = 16


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
        if not self.listeners.wait_idle(timeout=timeout):
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
        self.services.writer.close()
        self.services.executor.shutdown(wait=False)
        self.services.notices.shutdown(wait=False)
        if self.services.home is not None:
            self.services.home.shutdown()
        self.runtime.close()
        self.db.dispose()


def slack_client(
    settings: Settings, *, metrics: Metrics | None = None, token: str | None = None
) -> WebClient:
    """Timed, with retries; ``token`` defaults to ``SLACK_BOT_TOKEN`` (if set) unless
    installing by OAuth, where each workspace has its own."""
    if token is None and settings.slack_bot_token is not None and not settings.multi_workspace:
        token = settings.slack_bot_token.get_secret_value()
    return TimedWebClient(
        observe=(metrics or Metrics()).slack_call,
        token=token,
        base_url=settings.slack_api_url,
        # Passing retry_handlers replaces slack_sdk's default (connection errors): keep it.
        retry_handlers=[
            ConnectionErrorRetryHandler(),
            RateLimitErrorRetryHandler(max_retry_count=2),
        ],
    )


def verify_slack(client: WebClient, settings: Settings) -> str | None:
    """Fail at start, in one line, when Slack is unreachable or refuses the token; return the
    workspace's URL (for links to runs)."""
    sdk_logger = logging.getLogger("slack_sdk.web.base_client")
    sdk_logger.disabled = True  # our message below says it once, without a traceback
    try:
        return client.auth_test().get("url")
    except SlackApiError as exc:
        error = exc.response.get("error", "unknown_error")
        raise ConfigError(f"SLACK_BOT_TOKEN: Slack refused the token ({error})") from None
    except (OSError, URLError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(
            f"SLACK_API_URL: cannot reach {settings.slack_api_url} ({reason})"
        ) from None
    finally:
        sdk_logger.disabled = False


@dataclass
class SlackSide:
    """How the bot reaches Slack: the workspaces' clients, the client Bolt starts from, and
    (installing by OAuth) Bolt's OAuth settings."""

    workspaces: Workspaces
    client: WebClient
    oauth: OAuthSettings | None = None

    @property
    def single(self) -> WebClient | None:
        """The one workspace's client, with one bot token; None with several workspaces."""
        return self.client if self.oauth is None else None


def single_workspace(settings: Settings, metrics: Metrics) -> SlackSide:
    client = slack_client(settings, metrics=metrics)
    return SlackSide(SingleWorkspace(client, url=verify_slack(client, settings)), client)


def installed_workspaces(
    settings: Settings, metrics: Metrics, *, db: Database, key: bytes | None
) -> SlackSide:
    """Tokens per team from our database (sealed with ``key`` when set), refreshed before
    they expire (token rotation) for outbound calls and incoming requests alike."""
    assert settings.slack_client_id is not None
    store = InstallationStore(client_id=settings.slack_client_id, engine=db.engine, key=key)
    refresher = refresher_for(settings, store, client=slack_client(settings, metrics=metrics))
    workspaces = InstalledWorkspaces(
        store,
        make_client=lambda token: slack_client(settings, metrics=metrics, token=token),
        refresher=refresher,
    )
    oauth = oauth_settings(
        settings,
        store=store,
        engine=db.engine,
        rotator=StoreTokenRotator(refresher),
        rotation_minutes=refresher.minutes,
    )
    return SlackSide(workspaces, slack_client(settings, metrics=metrics), oauth)


def bolt_app(settings: Settings, slack: SlackSide, *, http: bool, listeners: ListenerPool) -> App:
    """With one bot token, Bolt checks it once at start; installing by OAuth, Bolt serves the
    install pages and authorizes each request with its team's stored token."""
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
    listeners = ListenerPool(workers=LISTENER_THREADS)
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
