"""Settings from the environment (or a ``.env`` file). Secrets are never printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent_runtime.agent_entry import SHAPE as AGENT_SHAPE
from agent_runtime.encryption import CheckpointKeyError, parse_key
from agent_runtime.graph_runtime import DEFAULT_AGENT
from store.engines import DatabaseUrlError, sqlalchemy_url

SLACK_API_URL = "https://slack.com/api/"
AUDIT_KEY_MIN_LENGTH = 32


class ConfigError(Exception):
    """A setting is missing or invalid; the message names the variable, never its secret value."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", hide_input_in_errors=True)

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_client_id: str | None = None
    slack_client_secret: SecretStr | None = None
    """With ``SLACK_CLIENT_ID``, installs by OAuth: one bot token per workspace, stored (and with
    ``CHECKPOINT_ENCRYPTION_KEY``, encrypted) in the database; ``SLACK_BOT_TOKEN`` is unused."""
    slack_api_url: str = SLACK_API_URL
    database_url: str = "sqlite:///approval-bot.db"
    policy_file: Path | None = None
    agent: str = DEFAULT_AGENT
    agent_model: str = "offline"
    agent_model_kwargs: Annotated[dict[str, Any], NoDecode] = Field(
        default_factory=dict, repr=False
    )
    """Passed to ``init_chat_model`` with AGENT_MODEL: a JSON object (kept out of ``repr``: it
    may hold an API key)."""
    checkpoint_encryption_key: SecretStr | None = None
    audit_key: SecretStr | None = None
    workspace_dir: Path = Path("workspace")
    worker_threads: int = Field(default=8, ge=1, le=256)
    inbox_workers: bool = True
    """``serve`` works on stored clicks itself; false leaves them to ``approval-bot worker``."""
    worker_queue: int = Field(default=200, ge=1, le=100_000)
    ack_first_seconds: float = Field(default=0.5, ge=0.0, le=5.0)
    """On a burst of Slack requests, an inbox worker waits up to this long before it starts a
    click's decision work, so the acks (due within 3 seconds) come first. 0: never wait."""
    db_pool_size: int = Field(default=10, ge=1, le=200)
    claim_lease_seconds: float = Field(default=60.0, ge=1.0, le=3600.0)
    maintenance_interval_seconds: float = Field(default=30.0, ge=0.2, le=3600.0)
    card_retry_seconds: float = Field(default=10.0, ge=0.0, le=3600.0)
    thread_switch_ms: float = Field(default=1.0, gt=0.0, le=100.0)
    """How long a busy thread of ``serve`` keeps Python's interpreter before a waiting one gets
    it. An ack needs it several times, behind decision work: Python's 5 ms made acks wait."""
    resuming_card_after_seconds: float = Field(default=0.5, ge=0.0, le=60.0)
    """A resume that ends sooner updates its card once, with the result; a longer one shows
    "resuming" first. 0: always show it."""
    admin_port: int = Field(default=9100, ge=0, le=65535)
    """``/metrics``, ``/healthz`` and ``/readyz`` in every mode; 0 picks a free port."""
    admin_host: str = "0.0.0.0"
    log_format: Literal["text", "json"] = "text"
    langgraph_url: str | None = None
    """Set: the agent runs on this LangGraph Server, not in the bot (see the README)."""
    langgraph_assistant: str = "agent"
    langgraph_api_key: SecretStr | None = None

    @field_validator("langgraph_url")
    @classmethod
    def _server_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/") if value else None

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        try:
            sqlalchemy_url(value)
        except (DatabaseUrlError, ValueError) as exc:
            raise ValueError(str(exc)) from exc
        return value

    @field_validator("slack_api_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return value if value.endswith("/") else value + "/"

    @field_validator("agent")
    @classmethod
    def _module_function(cls, value: str) -> str:
        source, _, name = value.rpartition(":")
        if not source or not name:
            raise ValueError(f"must look like {AGENT_SHAPE}")
        return value

    @field_validator("agent_model_kwargs", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        """Parsed here, not by pydantic-settings, so bad JSON is one line naming the variable
        (and never echoes the value: it may hold an API key)."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
        if not isinstance(value, dict):
            raise ValueError('must be a JSON object, e.g. {"temperature": 0}')
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith("xapp-"):
            raise ValueError("must be an app-level token starting with xapp-")
        return value

    @field_validator("checkpoint_encryption_key")
    @classmethod
    def _encryption_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            try:
                parse_key(value.get_secret_value())
            except CheckpointKeyError as exc:
                raise ValueError(str(exc).split(": ", 1)[-1]) from None
        return value

    @field_validator("audit_key")
    @classmethod
    def _audit_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < AUDIT_KEY_MIN_LENGTH:
            raise ValueError(
                f"must be at least {AUDIT_KEY_MIN_LENGTH} characters "
                "(e.g. the output of openssl rand -base64 32)"
            )
        return value

    def audit_hmac_key(self) -> bytes | None:
        """The HMAC key of the audit chain: AUDIT_KEY's characters, as UTF-8."""
        key = self.audit_key
        return key.get_secret_value().encode("utf-8") if key is not None else None

    def encryption_key(self) -> bytes | None:
        key = self.checkpoint_encryption_key
        return parse_key(key.get_secret_value()) if key is not None else None

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def multi_workspace(self) -> bool:
        """OAuth installs, one token per workspace: set by ``SLACK_CLIENT_ID``."""
        return self.slack_client_id is not None

    def tune_interpreter(self) -> None:
        """Process-wide: for ``serve``, whose acks share the interpreter with its workers."""
        sys.setswitchinterval(self.thread_switch_ms / 1000)

    def require_slack(self, *, http: bool = True) -> None:
        """``serve`` needs the bot token (or, installing by OAuth, the app's client id and
        secret, over HTTP), and over HTTP the signing secret; name what is missing."""
        if self.multi_workspace:
            if self.socket_mode:
                raise ConfigError(
                    "SLACK_CLIENT_ID: installs by OAuth need HTTP mode (its install and "
                    "redirect pages); unset SLACK_APP_TOKEN"
                )
            needed: tuple[str, ...] = ("slack_client_secret",)
            needed += ("slack_signing_secret",) if http else ()
        elif http:
            needed = ("slack_bot_token", "slack_signing_secret")
        else:
            needed = ("slack_bot_token",)
        for name in needed:
            if getattr(self, name) is None:
                raise ConfigError(f"{name.upper()} is required to serve; set it in the environment")


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        variable = str(first["loc"][0]).upper() if first["loc"] else "settings"
        message = first["msg"].removeprefix("Value error, ")  # pydantic's wording, not ours
        raise ConfigError(f"{variable}: {message}") from None
