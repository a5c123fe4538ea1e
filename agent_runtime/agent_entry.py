"""What ``AGENT`` may name, and how the graph it gives gets the bot's checkpointer.

Accepted: a compiled graph, a factory taking the checkpointer (and, by keyword, any of the
bot's offers), a factory taking nothing, or one taking a ``RunnableConfig`` as LangGraph
Server's factories do; in a module (``package.module:name``) or a file (``path/file.py:name``).
Every way this can go wrong is one ``AgentLoadError`` line at start-up, never a traceback or a
failure at the first request.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from agent_runtime.errors import AgentLoadError

logger = logging.getLogger(__name__)
SHAPE = "package.module:name or path/to/file.py:name"
_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.VAR_POSITIONAL,
)


def one_line(exc: BaseException) -> str:
    """An exception as the single line start-up prints."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]


def load_entry(spec: str) -> Any:
    """The object ``spec`` names. Modules come from the installed packages or the working
    directory (like other app servers); a ``.py`` path is relative to the working directory."""
    source, _, name = spec.rpartition(":")
    if not source or not name:
        raise AgentLoadError(f"AGENT {spec!r} must look like {SHAPE}")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # what the module imports may sit beside you too
    try:
        module = _load_file(spec, source) if _is_path(source) else importlib.import_module(source)
    except AgentLoadError:
        raise
    except Exception as exc:  # whatever the module raises while it loads is one line
        raise AgentLoadError(f"AGENT {spec!r} cannot be loaded: {one_line(exc)}") from exc
    if not hasattr(module, name):
        raise AgentLoadError(f"AGENT {spec!r} cannot be loaded: {source} has no {name!r}")
    return getattr(module, name)


def _is_path(source: str) -> bool:
    return source.endswith(".py") or "/" in source or os.sep in source


def _load_file(spec: str, source: str) -> ModuleType:
    """Load the file once under a name of its own, registered so that classes defined in it
    (a state schema, say) can be found again when a checkpoint is read."""
    path = Path(source).expanduser()
    path = (path if path.is_absolute() else Path.cwd() / path).resolve()
    if not path.is_file():
        raise AgentLoadError(f"AGENT {spec!r} cannot be loaded: no file {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"approval_bot_agent_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise AgentLoadError(f"AGENT {spec!r} cannot be loaded: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def build_graph(
    spec: str, checkpointer: BaseCheckpointSaver, *, offers: Mapping[str, Any]
) -> Pregel:
    """The graph ``spec`` names or builds, running on ``checkpointer``."""
    entry = load_entry(spec)
    factory = not isinstance(entry, (Pregel, StateGraph)) and callable(entry)
    made = _call_factory(spec, entry, checkpointer, offers) if factory else entry
    graph = bind_checkpointer(spec, made, checkpointer)
    if offers.get("gate") is not None and not (factory and _takes(entry, "gate")):
        logger.warning(
            "AGENT %r is not a factory taking gate: the bot cannot hand it the "
            "point-of-effect gate, so its tools run on the review alone unless they gate "
            "themselves (see Protect your own tools in the README)",
            spec,
        )
    return graph


def _takes(factory: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _call_factory(
    spec: str,
    factory: Callable[..., Any],
    checkpointer: BaseCheckpointSaver,
    offers: Mapping[str, Any],
) -> Any:
    """The first positional parameter gets a ``RunnableConfig`` when it asks for one (named
    ``config`` or so annotated), else the checkpointer; none is passed to a factory that needs
    none. A keyword-only ``checkpointer`` gets it by keyword. Offers go by keyword to the
    parameters named after them (all of them to ``**kw``)."""
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to read: call it with nothing
        params = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in offers.items() if takes_all or k in params}
    args: tuple[Any, ...] = ()
    first = _first_slot(params, offers)
    keyword = params.get("checkpointer")
    if keyword is not None and keyword.kind is inspect.Parameter.KEYWORD_ONLY:
        kwargs["checkpointer"] = checkpointer  # def build(*, checkpointer, model, ...)
    elif first is not None:
        value: Any = RunnableConfig(configurable={}) if _wants_config(first) else checkpointer
        if first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            kwargs[first.name] = value
        else:
            args = (value,)
    try:
        return factory(*args, **kwargs)
    except Exception as exc:  # the user's code failing is one line, not a traceback
        detail = f"{type(exc).__name__}: {one_line(exc)}"
        raise AgentLoadError(f"AGENT {spec!r} failed to build the graph: {detail}") from exc


def _first_slot(
    params: Mapping[str, inspect.Parameter], offers: Mapping[str, Any]
) -> inspect.Parameter | None:
    """The positional parameter that takes the checkpointer or the config, if any: one
    without a default, or with one but named or annotated for it."""
    for param in params.values():
        if param.kind not in _POSITIONAL or param.name in offers:
            continue
        required = param.default is inspect.Parameter.empty
        named = param.name in ("checkpointer", "config") or _wants_config(param)
        return param if required or named else None
    return None


def _wants_config(param: inspect.Parameter) -> bool:
    return param.name == "config" or "RunnableConfig" in str(param.annotation)


def bind_checkpointer(spec: str, made: Any, checkpointer: BaseCheckpointSaver) -> Pregel:
    """A graph compiled without a checkpointer gets the bot's, as LangGraph Server gives its
    own; one compiled with another (or with ``checkpointer=False``) would keep runs where the
    bot cannot find them, so it is refused."""
    if isinstance(made, StateGraph):
        raise AgentLoadError(
            f"AGENT {spec!r} gives a StateGraph that is not compiled: give its .compile()"
        )
    if inspect.iscoroutine(made):
        made.close()
        raise AgentLoadError(
            f"AGENT {spec!r} is an async function: give one that returns the compiled graph"
        )
    if not isinstance(made, Pregel):
        raise AgentLoadError(
            f"AGENT {spec!r} gives a {type(made).__name__}, not a compiled LangGraph graph "
            "or a function that returns one"
        )
    own = made.checkpointer
    if own is checkpointer:
        return made
    if own is not None:
        what = type(own).__name__ if isinstance(own, BaseCheckpointSaver) else f"={own!r}"
        raise AgentLoadError(
            f"AGENT {spec!r} is compiled with its own checkpointer ({what}); compile it "
            "without one and the bot gives it the checkpointer of DATABASE_URL"
        )
    try:
        bound = made.copy(update={"checkpointer": checkpointer})
    except Exception as exc:  # a graph type that cannot be copied with another checkpointer
        raise AgentLoadError(
            f"AGENT {spec!r} cannot be given the bot's checkpointer: {one_line(exc)}"
        ) from exc
    if getattr(bound, "checkpointer", None) is not checkpointer:
        raise AgentLoadError(
            f"AGENT {spec!r} has no checkpointer and cannot be given the bot's: "
            "compile it with the checkpointer its factory receives"
        )
    return bound
