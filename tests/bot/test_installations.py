"""Installs by OAuth on our own database: slack_sdk's stores work on tables made by our
migration (SQLite and PostgreSQL), and tokens are sealed at rest when a key is set."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import MetaData, inspect, text

from agent_runtime.encryption import CheckpointKeyError
from bot.installations import TOKEN_COLUMNS, InstallationStore, OAuthStateStore
from bot.workspaces import InstalledWorkspaces, WorkspaceNotInstalled
from store.db import Database
from store.migrate import upgrade

KEY = base64.b64decode(base64.b64encode(b"k" * 32))
CLIENT_ID = "1000.2000"
BOT_TOKEN = "xoxb-1111-secret-bot-token"
REFRESH = "xoxe-1-secret-refresh-token"
USER_TOKEN = "xoxp-2222-secret-user-token"


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> Iterator[Database]:  # type: ignore[no-untyped-def]
    url = (
        f"sqlite:///{tmp_path / 'installs.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("migrated_pg_url")
    )
    database = Database(url)
    upgrade(database.engine)
    yield database
    database.dispose()


def installation(
    team: str = "T0ACME", *, bot_token: str = BOT_TOKEN, later: float = 0.0
) -> Installation:
    return Installation(
        app_id="A0APP",
        team_id=team,
        team_name="Acme",
        bot_token=bot_token,
        bot_id="B0BOT",
        bot_user_id="U0BOT",
        bot_scopes="chat:write,commands",
        bot_refresh_token=REFRESH,
        bot_token_expires_in=43200,
        user_id="U0INSTALLER",
        user_token=USER_TOKEN,
        installed_at=dt.datetime.now(dt.UTC).timestamp() + later,
    )


def test_the_migration_makes_the_tables_slack_sdk_expects(db):
    """Every column slack_sdk's stores read and write, with its nullability; token columns
    at least as wide as slack_sdk's (ours are wider: sealed tokens are longer)."""
    expected = MetaData()
    SQLAlchemyInstallationStore.build_installations_table(expected, "slack_installations")
    SQLAlchemyInstallationStore.build_bots_table(expected, "slack_bots")
    SQLAlchemyOAuthStateStore.build_oauth_states_table(expected, "slack_oauth_states")
    found = inspect(db.engine)
    for table in expected.tables.values():
        columns = {c["name"]: c for c in found.get_columns(table.name)}
        assert set(columns) == {c.name for c in table.columns}, table.name
        for column in table.columns:
            assert columns[column.name]["nullable"] == column.nullable, column.name
            length = getattr(column.type, "length", None)
            if length is not None:
                assert columns[column.name]["type"].length >= length, column.name
        if table.indexes:
            names = {i["name"] for i in found.get_indexes(table.name)}
            assert {i.name for i in table.indexes} <= names


def test_an_installation_is_saved_and_found_with_its_tokens_sealed(db):
    store = InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=KEY)
    store.save(installation())

    bot = store.find_bot(enterprise_id=None, team_id="T0ACME")
    assert bot is not None and bot.bot_token == BOT_TOKEN and bot.bot_refresh_token == REFRESH
    found = store.find_installation(enterprise_id=None, team_id="T0ACME")
    assert found is not None and found.user_token == USER_TOKEN
    with db.engine.connect() as conn:
        rows = [
            *conn.execute(text("SELECT * FROM slack_installations")).mappings(),
            *conn.execute(text("SELECT * FROM slack_bots")).mappings(),
        ]
    raw = " ".join(str(v) for row in rows for v in row.values())
    for secret in (BOT_TOKEN, REFRESH, USER_TOKEN, "xoxb-", "xoxp-", "xoxe-"):
        assert secret not in raw
    assert all(str(row["bot_token"]).startswith("aesgcm:") for row in rows)
    other = InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=b"x" * 32)
    with pytest.raises(CheckpointKeyError):
        other.find_bot(enterprise_id=None, team_id="T0ACME")


def test_without_a_key_tokens_are_stored_as_slack_sdk_stores_them(db):
    store = InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=None)
    store.save(installation())
    with db.engine.connect() as conn:
        raw = conn.execute(text("SELECT bot_token FROM slack_bots")).scalar_one()
    assert raw == BOT_TOKEN
    assert {c for c in TOKEN_COLUMNS} <= {c.name for c in store.installations.columns}


def test_the_state_store_issues_and_consumes_each_state_once(db):
    states = OAuthStateStore(expiration_seconds=60, engine=db.engine)
    state = states.issue()
    assert states.consume(state) is True
    assert states.consume(state) is False
    assert states.consume("never-issued") is False


def test_tables_come_from_the_migration_only(db):
    with pytest.raises(NotImplementedError):
        InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=None).create_tables()
    with pytest.raises(NotImplementedError):
        OAuthStateStore(expiration_seconds=60, engine=db.engine).create_tables()


def test_clients_per_team_follow_the_store(db):
    """Each team's client carries its own token; an unknown team is refused by a typed error;
    a reinstall with a new token is picked up once the cached client is old."""
    store = InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=KEY)
    store.save(installation("T0ACME"))
    store.save(installation("T0BETA", bot_token="xoxb-beta"))
    now = [0.0]
    made: list[str] = []

    def make(token: str):  # type: ignore[no-untyped-def]
        from slack_sdk import WebClient

        made.append(token)
        return WebClient(token=token)

    teams = InstalledWorkspaces(store, make_client=make, ttl=60, clock=lambda: now[0])
    assert teams.client("T0ACME").token == BOT_TOKEN
    assert teams.client("T0BETA").token == "xoxb-beta"
    assert teams.client("T0ACME") is teams.client("T0ACME")
    assert teams.bot_user("T0BETA") == "U0BOT"
    with pytest.raises(WorkspaceNotInstalled):
        teams.client("T0NOPE")
    with pytest.raises(WorkspaceNotInstalled):
        teams.client(None)

    store.save(installation("T0BETA", bot_token="xoxb-beta-2", later=5.0))
    assert teams.client("T0BETA").token == "xoxb-beta", "cached for a while"
    now[0] = 61.0
    assert teams.client("T0BETA").token == "xoxb-beta-2"
    assert made == [BOT_TOKEN, "xoxb-beta", "xoxb-beta-2"]


def test_user_groups_are_looked_up_in_the_workspace_whose_section_names_them():
    from slack_sdk import WebClient

    from agent_runtime.policy import Policy
    from bot.workspaces import group_clients

    policy = Policy.model_validate(
        {
            "version": "teams-1",
            "roles": {"release-managers": {"usergroups": ["S0TOP"]}},
            "teams": {
                "T0BETA": {"roles": {"release-managers": {"usergroups": ["S0BETA"]}}},
                "T0GONE": {"roles": {"release-managers": {"usergroups": ["S0GONE"]}}},
            },
        }
    )

    class Teams:
        def client(self, team_id: str | None) -> WebClient:
            if team_id != "T0BETA":
                raise WorkspaceNotInstalled(team_id)
            return WebClient(token="xoxb-beta")

    client_for = group_clients(policy, Teams())  # type: ignore[arg-type]
    beta = client_for("S0BETA")
    assert beta is not None and beta.token == "xoxb-beta"
    assert client_for("S0TOP") is None, "a top-level group names no workspace"
    assert client_for("S0GONE") is None, "a workspace that is not installed"


def test_a_client_read_while_the_app_is_removed_is_not_kept(db):
    """A request that read the team's token just before the app was removed must not put a
    client with that (revoked) token back in the cache for the next minute."""
    from slack_sdk import WebClient

    store = InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=KEY)
    store.save(installation("T0ACME"))
    teams = InstalledWorkspaces(store, make_client=lambda t: WebClient(token=t), ttl=60)
    read = store.find_bot

    def read_then_removed(**kwargs):  # type: ignore[no-untyped-def]
        found = read(**kwargs)
        teams.removed("T0ACME")  # the uninstall lands between the read and the cache write
        return found

    store.find_bot = read_then_removed  # type: ignore[method-assign]
    teams.client("T0ACME")  # the request in flight still gets its answer
    store.find_bot = read  # type: ignore[method-assign]
    with pytest.raises(WorkspaceNotInstalled):
        teams.client("T0ACME")


def test_installed_teams_come_earliest_install_first_and_leave_when_removed(db):
    """A reinstall keeps a workspace's place; another app's installs are not ours."""
    store = InstallationStore(client_id=CLIENT_ID, engine=db.engine, key=KEY)
    store.save(installation("T0BETA", later=-60.0))
    store.save(installation("T0ACME", later=-30.0))
    store.save(installation("T0BETA", bot_token="xoxb-beta-2"))
    InstallationStore(client_id="9.9", engine=db.engine, key=KEY).save(installation("T0ELSE"))
    teams = InstalledWorkspaces(store, make_client=lambda t: WebClient(token=t))
    assert teams.installed_teams() == ["T0BETA", "T0ACME"]
    teams.removed("T0BETA")
    assert teams.installed_teams() == ["T0ACME"]
