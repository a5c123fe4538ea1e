"""AGENT and AGENT_MODEL: every shape of graph the bot accepts runs on the bot's checkpointer,
and everything it cannot use is one line at start-up."""

from __future__ import annotations

import logging
import sys
import textwrap

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent_runtime.agent_entry import build_graph
from agent_runtime.agents.workspace import Workspace
from agent_runtime.errors import AgentLoadError
from agent_runtime.graph_runtime import close_checkpointer, open_runtime, resolve_model
from agent_runtime.policy import load_policy
from agent_runtime.wire import STOP_KEYS
from tests.agent_runtime import custom_graphs

GRAPHS = "tests.agent_runtime.custom_graphs"
QUESTION = {"kind": "free-form", "question": "why?"}

AGENT_FILE = textwrap.dedent(
    """
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt


    class FileState(TypedDict, total=False):
        answer: str


    def ask(state: FileState) -> FileState:
        return {"answer": str(interrupt({"kind": "free-form", "question": "why?"}))}


    builder = StateGraph(FileState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile()
    """
)


@pytest.fixture
def open_agent(tmp_path):  # type: ignore[no-untyped-def]
    """``open_agent(spec)`` starts the runtime as the bot does, on one SQLite file; a second
    call is the bot restarting on the same database."""
    opened = []

    def start(agent: str):  # type: ignore[no-untyped-def]
        runtime = open_runtime(
            database_url=f"sqlite:///{tmp_path / 'graphs.db'}",
            agent=agent,
            model="offline",
            policy=load_policy(None),
            workspace=Workspace(tmp_path / "ws").ensure(),
        )
        opened.append(runtime)
        return runtime

    yield start
    for runtime in opened:
        close_checkpointer(runtime.checkpointer)


def run_to_stop(runtime, payload, thread: str = "thread-1"):  # type: ignore[no-untyped-def]
    """Where the run stopped, as the engine takes it: told by the run, or read back."""
    stop = runtime.invoke(payload, thread)
    return stop if stop is not None else runtime.state(thread)


def pause_then_resume_after_a_restart(open_agent, spec: str) -> None:  # type: ignore[no-untyped-def]
    """The pause is saved where the bot keeps runs: a restarted bot finds it and resumes it.
    A graph keeping its own (in-memory) checkpoints would have nothing to resume."""
    first = open_agent(spec)
    paused = run_to_stop(first, {})
    assert [i.value for i in paused.interrupts] == [QUESTION]
    assert first.has_checkpoint("thread-1")

    again = open_agent(spec)
    assert again.state("thread-1").next == ("ask",)
    assert run_to_stop(again, Command(resume="because")).values == {"answer": "because"}
    assert again.state("thread-1").next == ()


@pytest.mark.parametrize(
    "name",
    [
        "COMPILED_GRAPH",  # a module-level compiled graph, as langgraph.json names them
        "custom_interrupt_graph",  # factory(checkpointer)
        "keyword_only_factory",  # factory(*, checkpointer, model)
        "zero_argument_factory",  # factory()
        "config_factory",  # factory(config), as LangGraph Server calls them
    ],
)
def test_each_entry_point_shape_pauses_and_resumes_on_the_bots_checkpointer(open_agent, name):
    pause_then_resume_after_a_restart(open_agent, f"{GRAPHS}:{name}")


def test_a_pause_inside_a_subgraph_is_resumed_after_a_restart(open_agent):
    first = open_agent(f"{GRAPHS}:NESTED_GRAPH")
    (paused,) = run_to_stop(first, {}).interrupts
    again = open_agent(f"{GRAPHS}:NESTED_GRAPH")
    assert [i.id for i in again.state("thread-1").interrupts] == [paused.id]
    done = run_to_stop(again, Command(resume={paused.id: "because"}))
    assert (done.values, done.interrupts) == ({"answer": "because"}, ())
    assert again.state("thread-1").next == ()
    assert custom_graphs.NESTED_GRAPH.checkpointer is None


def test_a_config_factory_gets_a_config_not_the_checkpointer(open_agent):
    custom_graphs.CONFIGS_SEEN.clear()
    open_agent(f"{GRAPHS}:config_factory")
    assert custom_graphs.CONFIGS_SEEN == [{"configurable": {}}]


def test_a_module_level_graph_is_not_changed_by_the_bot(open_agent):
    runtime = open_agent(f"{GRAPHS}:COMPILED_GRAPH")
    assert runtime.graph is not custom_graphs.COMPILED_GRAPH
    assert custom_graphs.COMPILED_GRAPH.checkpointer is None


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_python_file_path_as_in_langgraph_json(open_agent, tmp_path, monkeypatch, where):
    (tmp_path / "project" / "agent").mkdir(parents=True)
    (tmp_path / "project" / "agent" / "graph.py").write_text(AGENT_FILE)
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the bot adds the working directory
    path = "./agent/graph.py" if where == "relative" else str(tmp_path / "project/agent/graph.py")
    pause_then_resume_after_a_restart(open_agent, f"{path}:graph")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (f"{GRAPHS}:NOT_A_GRAPH", "gives a dict, not a compiled LangGraph graph"),
        (f"{GRAPHS}:not_a_graph", "gives a str, not a compiled LangGraph graph"),
        (f"{GRAPHS}:async_factory", "is an async function"),
        (f"{GRAPHS}:UNCOMPILED_GRAPH", "gives a StateGraph that is not compiled"),
        (f"{GRAPHS}:OWN_CHECKPOINTER_GRAPH", "compiled with its own checkpointer (InMemorySaver)"),
        (f"{GRAPHS}:NO_CHECKPOINTING_GRAPH", "compiled with its own checkpointer (=False)"),
        (f"{GRAPHS}:PINNED_GRAPH", "has no checkpointer and cannot be given the bot's"),
        (
            f"{GRAPHS}:raising_factory",
            "failed to build the graph: RuntimeError: the model registry is unreachable",
        ),
        ("no/such/agent.py:graph", "cannot be loaded: no file /"),
        ("no_such_package.agent:graph", "cannot be loaded: No module named 'no_such_package'"),
        (f"{GRAPHS}:no_such_name", "has no 'no_such_name'"),
        ("graph", "must look like package.module:name or path/to/file.py:name"),
    ],
)
def test_what_cannot_be_used_is_refused_at_start_in_one_line(open_agent, spec, message):
    with pytest.raises(AgentLoadError) as err:
        open_agent(spec)
    text = str(err.value)
    assert text.startswith(f"AGENT {spec!r}") and message in text and "\n" not in text


def test_a_file_that_fails_to_load_is_one_line(open_agent, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import json\n\nraise RuntimeError('missing setting\\nsecond line')\n")
    with pytest.raises(AgentLoadError) as err:
        open_agent(f"{broken}:graph")
    assert str(err.value).endswith("cannot be loaded: missing setting second line")


@pytest.fixture
def no_keys(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_a_model_name_whose_provider_is_inferred(no_keys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    model = resolve_model("claude-sonnet-4-5")
    assert type(model).__name__ == "ChatAnthropic"
    assert model.model == "claude-sonnet-4-5"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("claude-sonnet-4-5", "needs ANTHROPIC_API_KEY in the environment"),
        ("gpt-4o", "needs the langchain-openai package: pip install 'slack-approval-bot[openai]'"),
        (
            "mistral-large-latest",
            "needs the langchain-mistralai package: pip install langchain-mistralai",
        ),
    ],
)
def test_an_inferred_provider_without_its_package_or_key_is_one_line(no_keys, spec, message):
    with pytest.raises(AgentLoadError) as err:
        resolve_model(spec)
    assert str(err.value) == f"AGENT_MODEL {spec!r} {message}"


def test_model_kwargs_reach_the_model(no_keys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    options = {"base_url": "http://llm.internal:8080", "temperature": 0, "max_tokens": 321}
    model = resolve_model("anthropic:claude-sonnet-4-5", options)
    assert model.anthropic_api_url == "http://llm.internal:8080"  # type: ignore[attr-defined]
    assert model.temperature == 0  # type: ignore[attr-defined]
    assert model.max_tokens == 321  # type: ignore[attr-defined]


def test_an_api_key_in_the_model_kwargs_stands_for_the_environment(no_keys):
    model = resolve_model("claude-sonnet-4-5", {"api_key": "sk-ant-from-kwargs"})
    key = model.anthropic_api_key.get_secret_value()  # type: ignore[attr-defined]
    assert key == "sk-ant-from-kwargs"


def test_model_kwargs_the_model_refuses_are_one_line(no_keys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    with pytest.raises(AgentLoadError) as err:
        resolve_model("claude-sonnet-4-5", {"temperature": "very hot"})
    assert str(err.value).startswith("AGENT_MODEL 'claude-sonnet-4-5' cannot be used: ")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "options",
    [
        # A validator that fails on the whole input echoes every argument, the key included.
        {"api_key": "sk-ant-very-secret-1234", "max_tokens": 5, "model_kwargs": {"max_tokens": 5}},
        # A key of the wrong type is echoed as the field's input.
        {"api_key": ["sk-ant-very-secret-1234"]},
    ],
)
def test_a_refused_model_option_never_prints_the_api_key(no_keys, options):
    with pytest.raises(AgentLoadError) as err:
        resolve_model("anthropic:claude-sonnet-4-5", options)
    text = str(err.value)
    assert text.startswith("AGENT_MODEL 'anthropic:claude-sonnet-4-5' cannot be used: ")
    assert "very-secret" not in text and "sk-ant" not in text
    # Nor does a traceback: the provider's own error (which holds the key) is not chained.
    assert err.value.__cause__ is None and err.value.__suppress_context__


@pytest.mark.parametrize(
    ("spec", "warned"),
    [
        (f"{GRAPHS}:REFUND_GRAPH", True),  # compiled at import: no gate could be handed to it
        (f"{GRAPHS}:custom_interrupt_graph", True),  # a factory that takes no gate
        ("examples.plain_graph:build_graph", False),  # takes the gate
    ],
)
def test_a_graph_the_gate_cannot_be_handed_to_is_named_at_start(caplog, spec, warned):
    """A graph compiled before the bot starts never receives the point-of-effect gate: its
    tools run on the review alone unless they gate themselves. Start-up says so."""
    with caplog.at_level(logging.WARNING, logger="agent_runtime.agent_entry"):
        build_graph(spec, InMemorySaver(), offers={"gate": object(), "policy": None})
    said = [r.getMessage() for r in caplog.records if "point-of-effect gate" in r.getMessage()]
    assert bool(said) is warned
    assert all(m.startswith(f"AGENT {spec!r}") for m in said)


APPROVE = {"decisions": [{"type": "approve"}]}


def _interrupts(stop):  # type: ignore[no-untyped-def]
    return sorted((i.id, repr(i.value)) for i in stop.interrupts)


BENCH_GRAPH = "bench.slow_graph:build_graph"


@pytest.mark.parametrize(
    ("spec", "stops", "told"),
    [
        # two interrupts in one node, two parallel ones answered one at a time, the end
        (f"{GRAPHS}:stops_graph", [1, 1, 2, 1, 0], True),
        (f"{GRAPHS}:messages_output_graph", [1, 1, 2, 1, 0], True),
        # its output leaves the messages out; its tasks are hidden from its output: read back
        (f"{GRAPHS}:answer_output_graph", [1, 1, 2, 1, 0], False),
        (f"{GRAPHS}:hidden_stops_graph", [1, 1, 2, 1, 0], False),
        (f"{GRAPHS}:NESTED_GRAPH", [1, 0], True),  # inside a subgraph
        (BENCH_GRAPH, [1, 0], True),  # messages, a reviewed tool call
    ],
)
def test_where_a_run_stopped_is_what_the_checkpoint_says(open_agent, spec, stops, told):
    """The engine takes what it reads of a thread after a run (``STOP_KEYS`` and the
    pending interrupts) from the run itself when its output can tell it: it must be what
    reading the checkpoint back gives, wherever the thread stopped."""
    from langchain_core.messages import HumanMessage

    runtime = open_agent(spec)
    bench = spec == BENCH_GRAPH
    stop = runtime.invoke(
        {"messages": [HumanMessage("change tool_seconds=0")]} if bench else {}, "thread-1"
    )
    seen = []
    while True:
        assert (stop is not None) == told
        state = runtime.state("thread-1")
        stop = stop if stop is not None else state
        assert [stop.values.get(k) for k in STOP_KEYS] == [state.values.get(k) for k in STOP_KEYS]
        assert _interrupts(stop) == _interrupts(state)
        seen.append(len(stop.interrupts))
        if not stop.interrupts or len(seen) > len(stops):
            break
        waiting = stop.interrupts[0]
        resume = APPROVE if bench else f"answer {len(seen)}"
        stop = runtime.invoke(Command(resume={waiting.id: resume}), "thread-1")
    assert seen == stops
