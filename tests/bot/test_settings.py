from __future__ import annotations

import subprocess
import sys

import pytest

from bot.settings import ConfigError, load_settings

SECRET = "s3cr3t-value-never-printed"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in (
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "SLACK_CLIENT_ID",
        "SLACK_CLIENT_SECRET",
        "DATABASE_URL",
        "AGENT",
        "AGENT_MODEL",
        "AGENT_MODEL_KWARGS",
        "SLACK_API_URL",
        "POLICY_FILE",
        "THREAD_SWITCH_MS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults_need_nothing():
    settings = load_settings()
    assert settings.database_url.startswith("sqlite:///")
    assert settings.agent_model == "offline"
    assert not settings.socket_mode


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("DATABASE_URL", "mysql://x/y", "DATABASE_URL"),
        ("SLACK_API_URL", "ftp://x", "SLACK_API_URL"),
        ("AGENT", "no_function_here", "AGENT"),
        ("SLACK_APP_TOKEN", SECRET, "SLACK_APP_TOKEN"),
        ("WORKER_THREADS", "0", "WORKER_THREADS"),
        ("THREAD_SWITCH_MS", "0", "THREAD_SWITCH_MS"),
        ("AGENT_MODEL_KWARGS", '{"api_key": "' + SECRET + '",', "AGENT_MODEL_KWARGS: not valid"),
        ("AGENT_MODEL_KWARGS", '["' + SECRET + '"]', "AGENT_MODEL_KWARGS: must be a JSON object"),
    ],
)
def test_invalid_values_name_the_variable_and_hide_the_value(
    monkeypatch, variable, value, fragment
):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert message.startswith(fragment) and "\n" not in message
    assert SECRET not in message


def test_serve_hands_the_interpreter_to_a_waiting_thread_sooner_than_python_does(monkeypatch):
    """An ack waits for the interpreter behind decision work several times; Python lets a busy
    thread keep it 5 ms each time, ``serve`` 1 ms unless told otherwise."""
    before = sys.getswitchinterval()
    try:
        load_settings().tune_interpreter()
        assert sys.getswitchinterval() == pytest.approx(0.001)
        monkeypatch.setenv("THREAD_SWITCH_MS", "2.5")
        load_settings().tune_interpreter()
        assert sys.getswitchinterval() == pytest.approx(0.0025)
    finally:
        sys.setswitchinterval(before)


def test_model_kwargs_are_a_json_object(monkeypatch):
    assert load_settings().agent_model_kwargs == {}
    monkeypatch.setenv("AGENT_MODEL_KWARGS", '{"base_url": "http://llm:8080", "temperature": 0}')
    assert load_settings().agent_model_kwargs == {"base_url": "http://llm:8080", "temperature": 0}


def test_settings_shown_whole_never_show_a_key_in_the_model_kwargs(monkeypatch):
    monkeypatch.setenv("AGENT_MODEL_KWARGS", '{"api_key": "' + SECRET + '", "temperature": 0}')
    settings = load_settings()
    assert settings.agent_model_kwargs["api_key"] == SECRET
    assert SECRET not in repr(settings) and SECRET not in str(settings)


@pytest.mark.parametrize("agent", ["src/agent/graph.py:graph", "/srv/agent.py:graph"])
def test_agent_may_name_a_python_file(monkeypatch, agent):
    monkeypatch.setenv("AGENT", agent)
    assert load_settings().agent == agent


def test_serve_requires_slack_credentials(monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", SECRET)
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        load_settings().require_slack()


def test_installs_by_oauth_need_the_client_secret_and_http_not_the_bot_token(monkeypatch):
    monkeypatch.setenv("SLACK_CLIENT_ID", "1000.2000")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    assert load_settings().multi_workspace
    with pytest.raises(ConfigError, match="SLACK_CLIENT_SECRET"):
        load_settings().require_slack()
    monkeypatch.setenv("SLACK_CLIENT_SECRET", SECRET)
    load_settings().require_slack()  # no SLACK_BOT_TOKEN needed
    load_settings().require_slack(http=False)  # a worker: no pages to serve
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    with pytest.raises(ConfigError, match=r"SLACK_CLIENT_ID: .*HTTP mode") as err:
        load_settings().require_slack()
    assert SECRET not in str(err.value)


def test_env_file_is_read(tmp_path):
    (tmp_path / ".env").write_text("AGENT_MODEL=anthropic:some-model\n")
    assert load_settings().agent_model == "anthropic:some-model"


def test_cli_start_up_error_is_one_clear_line(tmp_path):
    env = {"PATH": "", "SLACK_BOT_TOKEN": SECRET, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "approval-bot: SLACK_SIGNING_SECRET is required to serve; set it in the environment"
    )
    assert SECRET not in done.stderr + done.stdout


def test_slack_refusing_the_token_stops_start_up_clearly(tmp_path):
    from bot.app import build_bot
    from bot.sandbox.server import SlackSandbox

    sandbox = SlackSandbox().start()
    try:
        settings = load_settings(
            slack_bot_token="xoxb-not-the-right-one",
            slack_signing_secret=SECRET,
            slack_api_url=sandbox.api_url,
            database_url=f"sqlite:///{tmp_path / 'x.db'}",
        )
        with pytest.raises(ConfigError) as err:
            build_bot(settings)
    finally:
        sandbox.stop()
    assert str(err.value) == "SLACK_BOT_TOKEN: Slack refused the token (invalid_auth)"
    assert not (tmp_path / "x.db").exists(), "nothing is created before Slack says yes"
