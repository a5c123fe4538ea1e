"""The checkpointed graph the bot drives: checkpointer from DATABASE_URL, graph from AGENT."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from pydantic import ValidationError

from agent_runtime.agent_entry import build_graph, one_line
from agent_runtime.agents.workspace import Workspace
from agent_runtime.catalog import ToolCatalog
from agent_runtime.encryption import checkpoint_serde
from agent_runtime.errors import AgentLoadError
from agent_runtime.gate import EffectGate
from agent_runtime.offline_model import OfflineChatModel
from agent_runtime.policy import Policy
from agent_runtime.runtime import ThreadStop
from agent_runtime.stops import OutputStops
from agent_runtime.workflow_audit import workflow_audit
from store.engines import is_sqlite, sqlite_path

DEFAULT_AGENT = "agent_runtime.agents.change_request:build_agent"
CHECKPOINT_SETUP_LOCK = 0x4348_4B50_5345_5450


def open_checkpointer(
    database_url: str, *, pool_size: int = 10, key: bytes | None = None
) -> BaseCheckpointSaver:
    """SqliteSaver on the SQLite file, or PostgresSaver on a pool configured as it requires;
    checkpoints encrypted when a key is given."""
    serde = checkpoint_serde(key)
    saver: BaseCheckpointSaver
    if is_sqlite(database_url):
        conn = sqlite3.connect(sqlite_path(database_url), check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn, serde=serde)
    else:
        pool = ConnectionPool(
            _libpq_url(database_url),
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        saver = PostgresSaver(pool, serde=serde)  # type: ignore[arg-type]  # dict rows, as required
        with _setup_turn(database_url):
            saver.setup()
        return saver
    saver.setup()
    return saver


@contextlib.contextmanager
def _setup_turn(database_url: str, *, wait: float = 120.0) -> Iterator[None]:
    """Processes setting up at once take turns. The lock is polled, not waited on: a session
    blocked in ``pg_advisory_lock`` holds a snapshot, which the saver's ``CREATE INDEX
    CONCURRENTLY`` in the process holding the lock would wait for (a deadlock)."""
    with psycopg.connect(_libpq_url(database_url), autocommit=True) as lock:
        deadline = time.monotonic() + wait
        while not lock.execute(
            "SELECT pg_try_advisory_lock(%s)", (CHECKPOINT_SETUP_LOCK,)
        ).fetchone()[0]:  # type: ignore[index]
            if time.monotonic() > deadline:
                raise TimeoutError("another process kept the checkpointer set-up lock")
            time.sleep(0.2)
        yield  # the lock ends with its connection


def close_checkpointer(saver: BaseCheckpointSaver) -> None:
    conn = getattr(saver, "conn", None)
    if conn is not None and hasattr(conn, "close"):
        conn.close()


def _libpq_url(database_url: str) -> str:
    scheme, rest = database_url.split("://", 1)
    return "postgresql://" + rest if scheme.startswith("postgres") else database_url


PROVIDERS = {
    # package of the chat model: (pip extra, API key variable)
    "langchain_openai": ("openai", "OPENAI_API_KEY"),
    "langchain_anthropic": ("anthropic", "ANTHROPIC_API_KEY"),
}
PROVIDER_PACKAGES = {"openai": "langchain_openai", "anthropic": "langchain_anthropic"}


def resolve_model(spec: str, options: Mapping[str, Any] | None = None) -> BaseChatModel:
    """``offline``, or any model string ``init_chat_model`` takes (``provider:model``, or a
    name it infers the provider of, such as ``gpt-4o``) with ``options`` (AGENT_MODEL_KWARGS)
    passed on. A missing package or key is one clear error at start-up, not a failure at the
    first request."""
    if spec == "offline":
        return OfflineChatModel()
    kwargs = dict(options or {})
    named = PROVIDER_PACKAGES.get(spec.partition(":")[0]) if ":" in spec else None
    if named is not None:  # checked first: some providers' constructors fail without a key
        if importlib.util.find_spec(named) is None:
            raise _package_error(spec, named)
        _require_key(spec, named, kwargs)
    try:
        model = init_chat_model(spec, **kwargs)
    except ImportError as exc:  # the provider inferred or named needs a package
        missing = getattr(exc.__cause__, "name", None) or exc.name
        if not missing:
            raise AgentLoadError(f"AGENT_MODEL {spec!r} cannot be used: {one_line(exc)}") from exc
        raise _package_error(spec, missing.partition(".")[0]) from exc
    except Exception as exc:  # any other provider failure must stop start-up with one line
        detail = _without_secrets(exc, kwargs)
        raise AgentLoadError(f"AGENT_MODEL {spec!r} cannot be used: {detail}") from None
    _require_key(spec, type(model).__module__.partition(".")[0], kwargs)
    return model


def _without_secrets(exc: Exception, options: Mapping[str, Any]) -> str:
    """The provider's complaint without the values of AGENT_MODEL_KWARGS, which may hold an API
    key: pydantic echoes a field's input, or the whole input when a model validator fails."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or type(exc).__name__}: {e['msg']}"
            for e in errors
        )[:300]
    text = one_line(exc)
    for value in _leaves(options):
        text = text.replace(value, "***")
    return text


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) >= 4:
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)


def _package_error(spec: str, package: str) -> AgentLoadError:
    extra = PROVIDERS.get(package)
    dist = package.replace("_", "-")
    hint = f"'slack-approval-bot[{extra[0]}]'" if extra else dist
    return AgentLoadError(f"AGENT_MODEL {spec!r} needs the {dist} package: pip install {hint}")


def _require_key(spec: str, package: str, kwargs: Mapping[str, Any]) -> None:
    """A known provider's key must be in the environment, or given in AGENT_MODEL_KWARGS."""
    known = PROVIDERS.get(package)
    if known is None or any(name.endswith("api_key") for name in kwargs):
        return
    if not os.environ.get(known[1]):
        raise AgentLoadError(f"AGENT_MODEL {spec!r} needs {known[1]} in the environment")


@dataclass
class GraphRuntime:
    """The compiled graph and how to address one run's thread in it."""

    graph: Pregel
    checkpointer: BaseCheckpointSaver
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
    recursion_limit: int = 50
    stops: OutputStops | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.catalog.add_graph(self.graph)
        self.stops = OutputStops.of(self.graph)

    def config(self, thread_id: str) -> RunnableConfig:
        return RunnableConfig(
            configurable={"thread_id": thread_id}, recursion_limit=self.recursion_limit
        )

    def state(self, thread_id: str) -> StateSnapshot:
        return self.graph.get_state(self.config(thread_id))

    def has_checkpoint(self, thread_id: str) -> bool:
        return self.checkpointer.get_tuple(self.config(thread_id)) is not None

    def invoke(self, payload: Any, thread_id: str) -> ThreadStop | None:
        """Run the graph, every step saved before the next starts: a crash inside a tool must
        not lose the step that an approved action belongs to. Where it stopped, when its
        output tells it (``OutputStops``)."""
        output = self.graph.invoke(payload, self.config(thread_id), durability="sync")
        return self.stops.stop(output) if self.stops is not None else None

    def close(self) -> None:
        close_checkpointer(self.checkpointer)


def open_runtime(
    *,
    database_url: str,
    agent: str,
    model: str,
    model_kwargs: Mapping[str, Any] | None = None,
    policy: Policy,
    workspace: Workspace,
    gate: EffectGate | None = None,
    key: bytes | None = None,
    pool_size: int = 10,
) -> GraphRuntime:
    checkpointer = open_checkpointer(database_url, pool_size=pool_size, key=key)
    try:
        graph = build_graph(
            agent,
            checkpointer,
            offers={
                "policy": policy,
                "model": resolve_model(model, model_kwargs),
                "workspace": workspace,
                "gate": gate,
                "audit": workflow_audit(gate.db) if gate is not None else None,
            },
        )
    except Exception:
        close_checkpointer(checkpointer)
        raise
    catalog = gate.catalog if gate is not None else ToolCatalog()
    return GraphRuntime(graph=graph, checkpointer=checkpointer, catalog=catalog)
