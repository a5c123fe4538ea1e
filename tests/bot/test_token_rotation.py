"""Token rotation: a workspace's bot token that expires is refreshed before it is used (once,
however many threads need it), saved sealed in the installation store, and picked up there by
the other replicas; a workspace without rotation keeps its token as it is."""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth.installation_store import Installation
from sqlalchemy import text

from bot.installations import InstallationStore
from bot.sandbox import people
from bot.sandbox.installs import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.token_rotation import ROTATION_MINUTES, TokenRefresher
from bot.workspaces import InstalledWorkspaces, TokenNotRefreshed
from store.db import Database
from store.migrate import upgrade
from tests.bot.test_oauth_installs import driver, install, start_run

KEY = base64.b64decode(base64.b64encode(b"r" * 32))
ACME, BETA = "T0SANDBOX", "T0BETA"
TABLES = ("slack_bots", "slack_installations")


@pytest.fixture
def sandbox() -> Iterator[SlackSandbox]:
    slack = SlackSandbox(users=people.USERS).start()
    slack.add_workspace(BETA, users={"U0BALICE": "bea"})
    yield slack
    slack.stop()


@pytest.fixture
def db(tmp_path) -> Iterator[Database]:  # type: ignore[no-untyped-def]
    database = Database(f"sqlite:///{tmp_path / 'rotation.db'}")
    upgrade(database.engine)
    yield database
    database.dispose()


def store_of(db: Database, key: bytes | None = KEY) -> InstallationStore:
    return InstallationStore(client_id=SANDBOX_CLIENT_ID, engine=db.engine, key=key)


def save(store: InstallationStore, team: str, token: str, refresh: str | None, expires: float):
    """An install of ``team`` whose bot token expires ``expires`` seconds from now (with a
    refresh token), or never (``refresh`` None)."""
    store.save(
        Installation(
            app_id="A0SANDBOX",
            team_id=team,
            bot_token=token,
            bot_id="B0BOT",
            bot_user_id="U0BOT",
            bot_scopes="chat:write",
            bot_refresh_token=refresh,
            bot_token_expires_at=int(time.time() + expires) if refresh else None,
            user_id="U0INSTALLER",
            installed_at=dt.datetime.now(dt.UTC).timestamp(),
        )
    )


def replica(store: InstallationStore, sandbox: SlackSandbox, made: list[str] | None = None):
    """One process's clients per workspace, refreshing through the sandbox."""

    def make(token: str) -> WebClient:
        if made is not None:
            made.append(token)
        return WebClient(token=token, base_url=sandbox.api_url)

    refresher = TokenRefresher(
        store,
        client_id=SANDBOX_CLIENT_ID,
        client_secret=SANDBOX_CLIENT_SECRET,
        client=WebClient(base_url=sandbox.api_url),
    )
    return InstalledWorkspaces(store, make_client=make, refresher=refresher)


def test_the_sandbox_spends_a_refresh_token_once_and_refuses_an_expired_token(sandbox):
    token, refresh = sandbox.expiring.issue(ACME, seconds=-1)
    with pytest.raises(SlackApiError) as expired:
        WebClient(token=token, base_url=sandbox.api_url).auth_test()
    assert expired.value.response["error"] == "token_expired"
    app = WebClient(base_url=sandbox.api_url)
    grant = {"grant_type": "refresh_token", "refresh_token": refresh}
    with pytest.raises(SlackApiError) as wrong:
        app.oauth_v2_access(client_id=SANDBOX_CLIENT_ID, client_secret="nope", **grant)
    assert wrong.value.response["ok"] is False, "only the app itself refreshes"
    answer = app.oauth_v2_access(
        client_id=SANDBOX_CLIENT_ID, client_secret=SANDBOX_CLIENT_SECRET, **grant
    )
    assert answer["token_type"] == "bot" and answer["expires_in"] == 12 * 3600
    new = WebClient(token=answer["access_token"], base_url=sandbox.api_url)
    assert new.auth_test()["team_id"] == ACME
    with pytest.raises(SlackApiError) as spent:
        app.oauth_v2_access(
            client_id=SANDBOX_CLIENT_ID, client_secret=SANDBOX_CLIENT_SECRET, **grant
        )
    assert spent.value.response["error"] == "invalid_refresh_token"
    assert sandbox.expiring.refreshes == [ACME]


def test_a_token_near_expiry_is_refreshed_once_before_a_call_and_saved_sealed(sandbox, db):
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, refresh, 60)
    teams = replica(store, sandbox)

    client = teams.client(ACME)
    assert client.chat_postMessage(channel=people.CHANNEL, text="hello")["ok"]
    assert sandbox.expiring.refreshes == [ACME]
    assert client.token != token
    stored = store.find_bot(enterprise_id=None, team_id=ACME)
    assert stored is not None and stored.bot_token == client.token
    assert stored.bot_refresh_token not in (None, refresh)
    assert stored.bot_token_expires_at is not None
    assert stored.bot_token_expires_at > time.time() + ROTATION_MINUTES * 60
    found = store.find_installation(enterprise_id=None, team_id=ACME)
    assert found is not None and found.bot_token == client.token, "the install row too"

    assert teams.client(ACME) is client
    assert sandbox.expiring.refreshes == [ACME], "refreshed once"
    with db.engine.connect() as conn:
        rows = [conn.execute(text(f"SELECT * FROM {t}")).one() for t in TABLES]  # updated in place
    raw = " ".join(str(value) for row in rows for value in row)
    assert "xoxe" not in raw and "aesgcm:" in raw, "tokens are sealed at rest"


def test_without_a_key_the_refreshed_token_is_stored_as_slack_sdk_stores_it(sandbox, db):
    store = store_of(db, key=None)
    token, refresh = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, refresh, 60)
    client = replica(store, sandbox).client(ACME)
    with db.engine.connect() as conn:
        raw = conn.execute(text("SELECT bot_token FROM slack_bots")).scalar_one()
    assert raw == client.token != token


def test_an_expired_token_is_never_used(sandbox, db):
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=-5)
    save(store, ACME, token, refresh, -5)
    teams = replica(store, sandbox)
    assert teams.client(ACME).auth_test()["team_id"] == ACME
    assert teams.bot_user(ACME) == "U0BOT"
    assert sandbox.expiring.expired_uses == 0
    assert sandbox.expiring.refreshes == [ACME]


def test_two_threads_needing_a_refresh_make_one(sandbox, db):
    """Both read the expiring token before either refreshes: the second waits for the first
    and takes its token."""
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, refresh, 60)
    teams = replica(store, sandbox)
    both_read = threading.Barrier(2, timeout=10)
    read = store.find_bot
    reads = itertools.count(1)

    def read_together(**kwargs: Any):  # type: ignore[no-untyped-def]
        found = read(**kwargs)
        if next(reads) <= 2:
            both_read.wait()
        return found

    store.find_bot = read_together  # type: ignore[method-assign]
    tokens: list[str | None] = []
    threads = [
        threading.Thread(target=lambda: tokens.append(teams.client(ACME).token)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(tokens) == 2 and tokens[0] == tokens[1] != token
    assert sandbox.expiring.refreshes == [ACME]


def test_a_token_another_replica_refreshed_is_taken_from_the_store(sandbox, db):
    """A replica that read the old token refreshes nothing once the store has a new one: its
    refresh token is spent (Slack revokes a refresh token once used)."""
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, refresh, 60)
    stale = store_of(db)
    old = stale.find_bot(enterprise_id=None, team_id=ACME)
    first = replica(store, sandbox).client(ACME)
    reads = [0]
    read = stale.find_bot

    def read_stale_once(**kwargs: Any):  # type: ignore[no-untyped-def]
        reads[0] += 1
        return old if reads[0] == 1 else read(**kwargs)

    stale.find_bot = read_stale_once  # type: ignore[method-assign]
    second = replica(stale, sandbox).client(ACME)
    assert second.token == first.token != token
    assert sandbox.expiring.refreshes == [ACME]


def test_a_failed_refresh_fails_that_workspace_only_and_is_logged(sandbox, db, caplog):
    store = store_of(db)
    token, _ = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, "xoxe-1-never-issued", 60)
    save(store, BETA, sandbox.team_tokens[BETA], None, 0)
    teams = replica(store, sandbox)
    with caplog.at_level(logging.ERROR), pytest.raises(TokenNotRefreshed) as failed:
        teams.client(ACME)
    assert failed.value.team_id == ACME and "invalid_refresh_token" in str(failed.value)
    assert any(ACME in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    assert teams.client(BETA).auth_test()["team_id"] == BETA
    assert sandbox.expiring.refreshes == []


def test_a_workspace_without_rotation_keeps_its_token(sandbox, db):
    store = store_of(db)
    save(store, ACME, SANDBOX_TOKEN, None, 0)
    made: list[str] = []
    teams = replica(store, sandbox, made)
    assert teams.client(ACME).auth_test()["ok"]
    assert teams.client(ACME).token == SANDBOX_TOKEN
    assert made == [SANDBOX_TOKEN]
    assert sandbox.expiring.refreshes == [] and "oauth.v2.access" not in sandbox.state.calls


def test_a_request_arriving_with_an_expired_token_is_authorized_with_a_refreshed_one(
    serve_bot, sqlite_url
):
    """Bolt authorizes each request with the stored token: it refreshes it first (through the
    same refresher, so the card posted next does not refresh again)."""
    slack = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
    slack.expiring.enable(install_seconds=3600)
    try:
        h = serve_bot(
            sqlite_url,
            sandbox=slack,
            slack_client_id=SANDBOX_CLIENT_ID,
            slack_client_secret=SANDBOX_CLIENT_SECRET,
            checkpoint_encryption_key=base64.b64encode(KEY).decode(),
        )
        install(h, ACME, user=people.REQUESTER)
        store = store_of(h.bot.db)
        installed = store.find_bot(enterprise_id=None, team_id=ACME)
        assert installed is not None and installed.bot_refresh_token is not None
        slack.expiring.expire(installed.bot_token or "")

        _root, card = start_run(h, driver(h, ACME), user=people.REQUESTER, channel=people.CHANNEL)
        assert card.team_id == ACME
        assert slack.expiring.expired_uses == 0
        assert slack.expiring.refreshes == [ACME]
        bot = store.find_bot(enterprise_id=None, team_id=ACME)
        found = store.find_installation(enterprise_id=None, team_id=ACME)
        assert bot is not None and found is not None
        assert bot.bot_token == found.bot_token != installed.bot_token
    finally:
        slack.stop()


def test_a_refused_refresh_keeps_a_token_that_has_not_expired_yet(sandbox, db, caplog):
    """Another replica spent the refresh token and has not saved its new token yet: the token
    at hand works for a while still, so the workspace keeps it (the refusal logged)."""
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=600)
    save(store, ACME, token, refresh, 600)
    WebClient(base_url=sandbox.api_url).oauth_v2_access(
        client_id=SANDBOX_CLIENT_ID,
        client_secret=SANDBOX_CLIENT_SECRET,
        grant_type="refresh_token",
        refresh_token=refresh,
    )
    with caplog.at_level(logging.ERROR):
        client = replica(store, sandbox).client(ACME)
    assert client.token == token
    assert client.chat_postMessage(channel=people.CHANNEL, text="hello")["ok"]
    assert any(ACME in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)


def test_a_refresh_slack_cannot_be_reached_for_keeps_a_token_that_has_not_expired(sandbox, db):
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=600)
    save(store, ACME, token, refresh, 600)
    refresher = TokenRefresher(
        store,
        client_id=SANDBOX_CLIENT_ID,
        client_secret=SANDBOX_CLIENT_SECRET,
        client=WebClient(base_url="http://127.0.0.1:9/api/"),
    )
    teams = InstalledWorkspaces(
        store,
        make_client=lambda t: WebClient(token=t, base_url=sandbox.api_url),
        refresher=refresher,
    )
    assert teams.client(ACME).token == token
    stored = store.find_bot(enterprise_id=None, team_id=ACME)
    assert stored is not None and stored.bot_refresh_token == refresh, "kept for the next try"


def test_a_workspace_removed_before_its_refresh_is_not_installed_again(sandbox, db):
    """The app was removed between reading the token and refreshing it: nothing is refreshed,
    and its tokens are not written back to the store."""
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, refresh, 60)
    teams = replica(store, sandbox)
    read = store.find_bot(enterprise_id=None, team_id=ACME)
    assert read is not None and teams.refresher is not None
    teams.removed(ACME)
    teams.refresher.fresh(read)
    assert store.find_bot(enterprise_id=None, team_id=ACME) is None
    assert store.teams() == []
    assert sandbox.expiring.refreshes == []


def test_a_refused_refresh_is_not_asked_for_again_on_every_call(sandbox, db):
    """Every call needs the workspace's client: a refusal is remembered for a while, instead of
    each call asking Slack once more (and waiting its turn to)."""
    store = store_of(db)
    token, _ = sandbox.expiring.issue(ACME, seconds=600)
    save(store, ACME, token, "xoxe-1-never-issued", 600)
    asked: list[str] = []

    class Counting(WebClient):
        def oauth_v2_access(self, **kwargs: Any) -> Any:  # type: ignore[override]
            asked.append(kwargs["refresh_token"])
            return super().oauth_v2_access(**kwargs)

    teams = replica(store, sandbox)
    assert teams.refresher is not None
    teams.refresher.client = Counting(base_url=sandbox.api_url)
    for _ in range(3):
        assert teams.client(ACME).token == token
    assert asked == ["xoxe-1-never-issued"]


def test_a_replica_refreshing_at_the_same_moment_as_another_takes_the_others_token(sandbox, db):
    """Both asked Slack with the same refresh token; the other got there first and saved its
    token: the refusal here gives way to that token."""
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=600)
    save(store, ACME, token, refresh, 600)
    other = replica(store_of(db), sandbox)
    won: list[str | None] = []

    class Overtaken(WebClient):
        def oauth_v2_access(self, **kwargs: Any) -> Any:  # type: ignore[override]
            won.append(other.client(ACME).token)
            return super().oauth_v2_access(**kwargs)

    teams = replica(store, sandbox)
    assert teams.refresher is not None
    teams.refresher.client = Overtaken(base_url=sandbox.api_url)
    assert teams.client(ACME).token == won[0] != token
    assert sandbox.expiring.refreshes == [ACME]


def test_a_workspace_removed_while_its_refresh_waits_on_slack_stays_removed(sandbox, db):
    """The removal waits for the refresh under way, then deletes what it saved: the tokens
    are not written back after the app was removed."""
    store = store_of(db)
    token, refresh = sandbox.expiring.issue(ACME, seconds=60)
    save(store, ACME, token, refresh, 60)
    teams = replica(store, sandbox)
    read = store.find_bot(enterprise_id=None, team_id=ACME)
    assert read is not None and teams.refresher is not None
    slow = sandbox.misbehave("oauth.v2.access", hold=True)
    refreshing = threading.Thread(target=teams.refresher.fresh, args=(read,))
    refreshing.start()
    assert slow.reached.wait(timeout=30)  # Slack has the refresh; its answer is held
    removing = threading.Thread(target=teams.removed, args=(ACME,))
    removing.start()
    slow.release.set()
    refreshing.join(timeout=30)
    removing.join(timeout=30)
    assert not refreshing.is_alive() and not removing.is_alive()
    assert store.find_bot(enterprise_id=None, team_id=ACME) is None
    assert store.teams() == []
