"""Installs by OAuth, end to end over signed HTTP: two sandbox workspaces install the bot
through its install link and Slack's redirect back; each runs and approves with its own token;
nobody decides across workspaces; an uninstalled workspace is refused; tokens are sealed."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from sqlalchemy import func, select, text

from bot.errors import NOT_INSTALLED, REFUSALS
from bot.ids import APPROVALS_COMMAND
from bot.installations import BOT_SCOPES
from bot.sandbox import people
from bot.sandbox.driver import SlackDriver, buttons
from bot.sandbox.installs import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.sandbox.state import Message
from bot.switch_cli import run_switch
from store.audit_models import AuditEvent
from store.models import Decision, Run
from tests.bot.flows import SEND, button
from tests.conftest import Harness

ACME = "T0SANDBOX"
BETA = "T0BETA"
BETA_REQUESTER, BETA_REVIEWER, BETA_CHANNEL = "U0BALICE", "U0BRAVI", "C0BETA"
BETA_GROUP, BETA_GROUP_MEMBER = "S0BETAREL", "U0BGINA"
BETA_TOKEN = "xoxb-beta-sandbox-token"
KEY = base64.b64encode(b"o" * 32).decode()
POLICY = f"""
version: "multi-1"
roles:
  release-managers: {{users: [{people.RELEASE_MANAGER}]}}
teams:
  {BETA}:
    roles:
      release-managers: {{users: [{BETA_REVIEWER}], usergroups: [{BETA_GROUP}]}}
requesters: [everyone]
tools:
  send_external_message:
    risk: medium
    decisions: [approve, reject]
    approvers: [release-managers]
"""
"""One policy for both workspaces: the second names its own release managers (a user group of
its own among them)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def get(url: str, *, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    """A browser's GET, without following redirects: status, headers, body."""
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def install(h: Harness, team: str, *, user: str) -> None:
    """The install link sends the browser to Slack's consent page; the user allows (the
    sandbox gives a code) and Slack sends the browser back to the bot with code and state."""
    status, headers, _ = get(h.url + "/slack/install")
    assert status == 302
    location = urlsplit(headers["Location"])
    assert f"{location.scheme}://{location.netloc}/" == h.sandbox.base_url
    assert location.path == "/oauth/v2/authorize"
    query = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert query["client_id"] == SANDBOX_CLIENT_ID
    assert set(query["scope"].split(",")) == set(BOT_SCOPES)
    cookie = headers["Set-Cookie"].split(";")[0]
    code = h.sandbox.grant(team, user=user)
    back = urlencode({"code": code, "state": query["state"]})
    status, _, body = get(f"{h.url}/slack/oauth_redirect?{back}", cookie=cookie)
    assert status == 200, body


@pytest.fixture
def two_workspaces(request, serve_bot, sqlite_url, tmp_path: Path) -> Iterator[Harness]:  # type: ignore[no-untyped-def]
    """Both workspaces, with ``POLICY`` (or the policy text a test passes as its param)."""
    sandbox = SlackSandbox(users=people.USERS, usergroups={BETA_GROUP: [BETA_GROUP_MEMBER]}).start()
    sandbox.add_workspace(
        BETA,
        users={BETA_REQUESTER: "bea", BETA_REVIEWER: "bruno", BETA_GROUP_MEMBER: "gia"},
        token=BETA_TOKEN,
        channels=(BETA_CHANNEL,),
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(getattr(request, "param", POLICY))
    h = serve_bot(
        sqlite_url,
        sandbox=sandbox,
        slack_client_id=SANDBOX_CLIENT_ID,
        slack_client_secret=SANDBOX_CLIENT_SECRET,
        checkpoint_encryption_key=KEY,
        policy_file=policy,
    )
    try:
        yield h
    finally:
        sandbox.stop()


def secret_of(h: Harness) -> str:
    secret = h.bot.settings.slack_signing_secret
    assert secret is not None
    return secret.get_secret_value()


def driver(h: Harness, team: str) -> SlackDriver:
    return SlackDriver(sandbox=h.sandbox, bot_url=h.url, signing_secret=secret_of(h), team_id=team)


def start_run(h: Harness, d: SlackDriver, *, user: str, channel: str) -> tuple[Message, Message]:
    before = {m.ts for m in h.state.top_level(channel)}
    assert d.slash_command(user=user, channel=channel, text=SEND).status == 200
    root = h.state.wait_for(
        lambda: next((m for m in h.state.top_level(channel) if m.ts not in before), None)
    )
    card = h.state.wait_for(
        lambda: next((m for m in h.state.thread(channel, root.ts) if buttons(m)), None)
    )
    return root, card


def result_of(h: Harness, root: Message) -> Message:
    return h.state.wait_for(
        lambda: next(
            (m for m in h.state.thread(root.channel, root.ts) if m.text.startswith("Run ")), None
        )
    )


def count(h: Harness, model: type) -> int:
    with h.bot.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_two_installed_workspaces_each_run_and_approve_with_their_own_token(two_workspaces):
    h = two_workspaces
    acme, beta = driver(h, ACME), driver(h, BETA)
    install(h, ACME, user=people.REQUESTER)
    install(h, BETA, user=BETA_REQUESTER)

    root_a, card_a = start_run(h, acme, user=people.REQUESTER, channel=people.CHANNEL)
    root_b, card_b = start_run(h, beta, user=BETA_REQUESTER, channel=BETA_CHANNEL)
    assert (root_a.team_id, card_a.team_id) == (ACME, ACME)
    assert (root_b.team_id, card_b.team_id) == (BETA, BETA)
    assert card_b.user == h.sandbox.bot_users[BETA], "posted as the bot of that workspace"

    # A reviewer of the other workspace clicks the first workspace's card: refused, unrecorded.
    beta.click(user=BETA_REVIEWER, message=card_a, button=button(card_a, "Approve"))
    refused = h.state.wait_for(lambda: h.state.ephemerals_for(BETA_REVIEWER))
    assert refused[0].text == REFUSALS["other_workspace"]
    assert h.bot.settle(timeout=30)
    assert count(h, Decision) == 0 and h.workspace.effects() == []
    with h.bot.db.transaction() as s:
        reasons = s.scalars(
            select(AuditEvent.reason).where(AuditEvent.kind == "decision_refused")
        ).all()
    assert reasons == ["other_workspace"]

    # Each workspace's own reviewer approves its own card: the tool runs once for each.
    acme.click(user=people.RELEASE_MANAGER, message=card_a, button=button(card_a, "Approve"))
    assert "message sent to partner@example.com" in result_of(h, root_a).text
    assert len(h.workspace.effects()) == 1
    # (in the second workspace, through its own user group, looked up with its own token)
    beta.click(user=BETA_GROUP_MEMBER, message=card_b, button=button(card_b, "Approve"))
    assert "message sent to partner@example.com" in result_of(h, root_b).text
    assert ("usergroups.users.list", BETA) in h.state.calls_by_team
    assert h.bot.settle(timeout=30)
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"] * 2
    assert count(h, Decision) == 2

    # Every call about a run went out with the token of the run's workspace.
    for channel, team in ((people.CHANNEL, ACME), (BETA_CHANNEL, BETA)):
        posted = [m for m in h.state.messages if m.channel == channel]
        assert posted and {m.team_id for m in posted} == {team}
    with h.bot.db.transaction() as s:
        teams = {r: t for r, t in s.execute(select(Run.requester_id, Run.team_id)).all()}
    assert teams == {people.REQUESTER: ACME, BETA_REQUESTER: BETA}

    # A Home tab opened in the second workspace is published with its token.
    assert beta.open_home(user=BETA_REVIEWER).status == 200
    h.state.wait_for(lambda: h.state.home_of(BETA_REVIEWER))
    assert ("views.publish", BETA) in h.state.calls_by_team

    # Tokens are not readable in the database without the key.
    with h.bot.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM slack_bots")).mappings().all()
        rows += conn.execute(text("SELECT * FROM slack_installations")).mappings().all()
    raw = json.dumps([{k: str(v) for k, v in row.items()} for row in rows])
    assert len(rows) == 4 and SANDBOX_TOKEN not in raw and BETA_TOKEN not in raw
    assert "xoxb-" not in raw


def test_a_workspace_that_has_not_installed_the_bot_is_refused(two_workspaces):
    h = two_workspaces
    install(h, ACME, user=people.REQUESTER)
    beta = driver(h, BETA)
    reply = beta.slash_command(user=BETA_REQUESTER, channel=BETA_CHANNEL, text=SEND)
    assert reply.status == 200
    answer = h.state.wait_for(lambda: h.state.responses)
    assert answer[0]["text"] == NOT_INSTALLED
    assert h.bot.settle(timeout=30)
    assert count(h, Run) == 0
    assert not [m for m in h.state.messages if m.channel == BETA_CHANNEL]


def test_a_workspace_that_removes_the_app_has_its_tokens_deleted_and_is_refused(two_workspaces):
    h = two_workspaces
    install(h, ACME, user=people.REQUESTER)
    install(h, BETA, user=BETA_REQUESTER)
    beta = driver(h, BETA)
    assert beta.event({"type": "app_uninstalled"}).status == 200
    assert h.bot.settle(timeout=30)
    with h.bot.db.engine.connect() as conn:
        teams = conn.execute(text("SELECT team_id FROM slack_bots")).scalars().all()
    assert teams == [ACME]
    beta.slash_command(user=BETA_REQUESTER, channel=BETA_CHANNEL, text=SEND)
    assert h.state.wait_for(lambda: h.state.responses)[0]["text"] == NOT_INSTALLED
    assert count(h, Run) == 0


def test_a_redirect_without_the_install_state_installs_nothing(two_workspaces):
    h = two_workspaces
    code = h.sandbox.grant(BETA, user=BETA_REQUESTER)
    status, _, _ = get(f"{h.url}/slack/oauth_redirect?{urlencode({'code': code, 'state': 'x'})}")
    assert status >= 400
    assert "oauth.v2.access" not in h.state.calls
    with h.bot.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM slack_bots")).scalar_one() == 0


def _consent(h: Harness) -> tuple[str, str]:
    """The install link's state and the cookie it set in the browser."""
    status, headers, _ = get(h.url + "/slack/install")
    assert status == 302
    query = {k: v[0] for k, v in parse_qs(urlsplit(headers["Location"]).query).items()}
    return query["state"], headers["Set-Cookie"].split(";")[0]


def _bots(h: Harness) -> int:
    with h.bot.db.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM slack_bots")).scalar_one())


def test_an_install_state_is_bound_to_the_browser_and_used_once(two_workspaces):
    """A state lifted from someone's install link (without their cookie) installs nothing; a
    redirect replayed with the same state and cookie installs nothing a second time."""
    h = two_workspaces
    state, cookie = _consent(h)
    stolen = urlencode({"code": h.sandbox.grant(BETA, user=BETA_REQUESTER), "state": state})
    assert get(f"{h.url}/slack/oauth_redirect?{stolen}")[0] >= 400
    assert _bots(h) == 0
    state, cookie = _consent(h)
    first = urlencode({"code": h.sandbox.grant(ACME, user=people.REQUESTER), "state": state})
    assert get(f"{h.url}/slack/oauth_redirect?{first}", cookie=cookie)[0] == 200
    again = urlencode({"code": h.sandbox.grant(BETA, user=BETA_REQUESTER), "state": state})
    assert get(f"{h.url}/slack/oauth_redirect?{again}", cookie=cookie)[0] >= 400
    with h.bot.db.engine.connect() as conn:
        assert conn.execute(text("SELECT team_id FROM slack_bots")).scalars().all() == [ACME]


def test_nobody_in_another_workspace_rejects_cancels_or_lists_a_workspaces_approval(
    two_workspaces,
):
    """Besides Approve: Reject (its reason modal), Cancel run and ``/approvals`` of a reviewer
    of the second workspace reach nothing of the first's."""
    h = two_workspaces
    acme, beta = driver(h, ACME), driver(h, BETA)
    install(h, ACME, user=people.REQUESTER)
    install(h, BETA, user=BETA_REQUESTER)
    root_a, card_a = start_run(h, acme, user=people.REQUESTER, channel=people.CHANNEL)
    _root_b, _card_b = start_run(h, beta, user=BETA_REQUESTER, channel=BETA_CHANNEL)

    beta.click(user=BETA_REVIEWER, message=card_a, button=button(card_a, "Reject"))
    beta.click(user=BETA_REVIEWER, message=card_a, button=button(card_a, "Cancel run"))
    beta.slash_command(user=BETA_REVIEWER, channel=BETA_CHANNEL, text="", command=APPROVALS_COMMAND)
    assert h.bot.settle(timeout=30)
    assert h.state.open_views(BETA_REVIEWER) == []
    assert count(h, Decision) == 0
    with h.bot.db.transaction() as s:
        assert {str(st) for st in s.scalars(select(Run.status)).all()} == {"waiting"}
    (listed,) = h.state.responses
    assert listed["text"] == "1 approval waiting on you", "only the second workspace's own"
    assert card_a.ts not in json.dumps(listed) and root_a.ts not in json.dumps(listed)


BETA_ADMIN = BETA_REVIEWER
ESCALATING = (
    POLICY.replace(
        'version: "multi-1"',
        f'version: "multi-1"\ndefaults: {{escalation_channel: {people.CHANNEL}}}',
    )
    .replace(
        f"roles:\n  release-managers: {{users: [{people.RELEASE_MANAGER}]}}",
        f"roles:\n  admins: {{users: [{people.ADMIN}]}}\n"
        f"  release-managers: {{users: [{people.RELEASE_MANAGER}]}}",
    )
    .replace(
        "    roles:\n      release-managers:",
        f"    roles:\n      admins: {{users: [{BETA_ADMIN}]}}\n      release-managers:",
    )
)
"""The escalation channel is the first workspace's; each workspace has admins of its own."""


@pytest.mark.parametrize("two_workspaces", [ESCALATING], indirect=True)
def test_a_pause_from_any_workspace_is_announced_in_the_escalation_channel(two_workspaces):
    """The switch stops every workspace's gated actions: the operators watching the escalation
    channel must hear of it, whichever workspace paused."""
    h = two_workspaces
    install(h, ACME, user=people.REQUESTER)
    install(h, BETA, user=BETA_REQUESTER)
    beta = driver(h, BETA)
    beta.slash_command(
        user=BETA_ADMIN, channel=BETA_CHANNEL, text="pause incident", command=APPROVALS_COMMAND
    )
    assert h.bot.settle(timeout=30)
    assert h.bot.services.switch.state().paused
    announced = [m for m in h.state.messages if m.channel == people.CHANNEL and "paused" in m.text]
    # (the sandbox lets any token post anywhere; Slack refuses a channel of another workspace)
    assert [m.team_id for m in announced] == [ACME], "posted with the channel's workspace token"


@pytest.mark.parametrize("two_workspaces", [ESCALATING], indirect=True)
def test_a_pause_and_resume_from_a_shell_are_announced_with_the_channels_workspace_token(
    two_workspaces, capsys
):
    """``approval-bot pause|resume`` has no workspace of its own: it announces with the tokens
    the installs left in the database, the escalation channel's workspace's."""
    h = two_workspaces
    install(h, ACME, user=people.REQUESTER)
    install(h, BETA, user=BETA_REQUESTER)
    assert run_switch(h.bot.settings, h.bot.db, pause=True, reason="incident 7") == 0
    assert run_switch(h.bot.settings, h.bot.db, pause=False, reason=None) == 0
    capsys.readouterr()
    announced = h.state.top_level(people.CHANNEL)
    assert [m.team_id for m in announced] == [ACME, ACME]
    assert "paused" in announced[0].text and "incident 7" in str(announced[0].blocks)
    assert "resumed" in announced[1].text.lower()


@pytest.mark.parametrize("two_workspaces", [ESCALATING], indirect=True)
def test_a_pause_from_a_shell_without_the_apps_secret_still_pauses_and_is_announced(
    two_workspaces, capsys
):
    """A shell that holds the database but not ``SLACK_CLIENT_SECRET`` cannot refresh tokens;
    the switch holds all the same, announced with the token the install left."""
    h = two_workspaces
    install(h, ACME, user=people.REQUESTER)
    shell = h.bot.settings.model_copy(update={"slack_client_secret": None})
    assert run_switch(shell, h.bot.db, pause=True, reason="incident 8") == 0
    capsys.readouterr()
    assert h.bot.services.switch.state().paused
    assert [m.team_id for m in h.state.top_level(people.CHANNEL)] == [ACME]


@pytest.mark.parametrize(
    "two_workspaces", [ESCALATING.replace(people.CHANNEL, BETA_CHANNEL)], indirect=True
)
def test_an_escalation_channel_of_the_later_workspace_is_found_there(two_workspaces):
    """The earliest install is tried first; Slack refuses it a channel of another workspace,
    and the next workspace posts (then straight away, once known)."""
    h = two_workspaces
    install(h, ACME, user=people.REQUESTER)
    install(h, BETA, user=BETA_REQUESTER)
    acme = driver(h, ACME)
    for command in ("pause incident", "resume"):
        acme.slash_command(
            user=people.ADMIN, channel=people.CHANNEL, text=command, command=APPROVALS_COMMAND
        )
        assert h.bot.settle(timeout=30)
    assert [m.team_id for m in h.state.top_level(BETA_CHANNEL)] == [BETA, BETA]
    posts = [team for method, team in h.state.calls_by_team if method == "chat.postMessage"]
    assert posts == [ACME, BETA, BETA]
