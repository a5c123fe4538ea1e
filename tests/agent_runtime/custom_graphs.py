"""Small graphs loaded through the AGENT hook in tests."""

from __future__ import annotations

import datetime as dt
import operator
import threading
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import TAG_HIDDEN
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from examples import plain_graph


class State(TypedDict, total=False):
    answer: str


def _ask(state: State) -> State:
    return {"answer": str(interrupt({"kind": "free-form", "question": "why?"}))}


def ask_builder() -> StateGraph:
    """Pauses on a payload that is not a HITL request, and answers with the resume value."""
    graph = StateGraph(State)
    graph.add_node("ask", _ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph


def custom_interrupt_graph(checkpointer):  # type: ignore[no-untyped-def]
    return ask_builder().compile(checkpointer=checkpointer)


# The shapes AGENT accepts besides ``factory(checkpointer)``.
COMPILED_GRAPH = ask_builder().compile()  # langgraph.json style: no checkpointer of its own
REFUND_GRAPH = plain_graph.build_graph(None)  # the example as a module-level compiled graph
_outer = StateGraph(State)
_outer.add_node("review", ask_builder().compile())  # a compiled subgraph, no checkpointer
_outer.add_edge(START, "review")
_outer.add_edge("review", END)
NESTED_GRAPH = _outer.compile()
"""Pauses inside a subgraph: the copy given the bot's checkpointer must keep it there too."""
CONFIGS_SEEN: list[Any] = []


def keyword_only_factory(*, checkpointer, model=None):  # type: ignore[no-untyped-def]
    """Everything by keyword, the checkpointer too."""
    return ask_builder().compile(checkpointer=checkpointer)


def zero_argument_factory():  # type: ignore[no-untyped-def]
    return ask_builder().compile()


def config_factory(config: RunnableConfig):  # type: ignore[no-untyped-def]
    """LangGraph Server's factory shape."""
    CONFIGS_SEEN.append(config)
    return ask_builder().compile()


# What AGENT refuses.
NOT_A_GRAPH = {"nodes": ["ask"]}
OWN_CHECKPOINTER_GRAPH = ask_builder().compile(checkpointer=InMemorySaver())
NO_CHECKPOINTING_GRAPH = ask_builder().compile(checkpointer=False)
UNCOMPILED_GRAPH = ask_builder()


class PinnedGraph(CompiledStateGraph):  # type: ignore[type-arg]
    """A graph type whose copies keep the checkpointer they had."""

    def copy(self, update: dict[str, Any] | None = None) -> PinnedGraph:
        return self


_plain = ask_builder().compile()
PINNED_GRAPH = PinnedGraph(**{k: v for k, v in vars(_plain).items() if k != "__orig_class__"})


def not_a_graph(checkpointer):  # type: ignore[no-untyped-def]
    return "nope"


async def async_factory(checkpointer):  # type: ignore[no-untyped-def]
    return ask_builder().compile(checkpointer=checkpointer)


def raising_factory(checkpointer):  # type: ignore[no-untyped-def]
    raise RuntimeError("the model registry is unreachable")


def stubborn_publish(checkpointer, **offers):  # type: ignore[no-untyped-def]
    """A drafter that never adds what the rubric asks for."""
    from agent_runtime.agents import rubric
    from agent_runtime.agents.publish_workflow import build_publish_workflow

    return build_publish_workflow(
        checkpointer,
        workspace=offers["workspace"],
        drafter=lambda request, sales, feedback: rubric.offline_draft(request, sales, []),
        max_iterations=2,
    )


def broken_grader_publish(checkpointer, **offers):  # type: ignore[no-untyped-def]
    from agent_runtime.agents.publish_workflow import build_publish_workflow

    def grader(report, sales, *, memory):  # type: ignore[no-untyped-def]
        raise RuntimeError("grader model unavailable")

    return build_publish_workflow(checkpointer, workspace=offers["workspace"], grader=grader)


def old_per_call_wiring(checkpointer, *, policy, model, workspace, gate):  # type: ignore[no-untyped-def]
    """The per-call agent as it used to be wired: review only through ``middleware=``, so Deep
    Agents' general-purpose subagent gets none and calls every parent tool directly. Only the
    tools' own gate stands between it and the effects."""
    from deepagents import create_deep_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    from agent_runtime.agents.change_request import interrupt_on_from_policy
    from agent_runtime.agents.tools import make_tools

    tools = make_tools(workspace, gate)
    gates = interrupt_on_from_policy(policy, {t.name: t for t in tools})
    hitl = [HumanInTheLoopMiddleware(interrupt_on=gates, interrupt_mode="per_call")]
    return create_deep_agent(model, tools, middleware=hitl, checkpointer=checkpointer)


def no_review_agent(checkpointer, *, model, workspace, gate):  # type: ignore[no-untyped-def]
    """An agent with no review step at all."""
    from langchain.agents import create_agent

    from agent_runtime.agents.tools import make_tools

    return create_agent(model, make_tools(workspace, gate), checkpointer=checkpointer)


TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "priority": {"type": "string", "enum": ["low", "high"], "default": "low"},
        "assignee": {"type": "string"},
    },
    "required": ["title"],
}


def mcp_style_agent(checkpointer, *, model, workspace, gate):  # type: ignore[no-untyped-def]
    """A tool whose schema is a JSON-schema dict (what MCP adapters produce), protected with
    ``gate_tools`` and reviewed by a plain HITL middleware."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import StructuredTool

    from agent_runtime.protect import gate_tools

    def create_ticket(**fields):  # type: ignore[no-untyped-def]
        workspace.record_effect("create_ticket", **fields)
        return f"ticket created: {fields.get('title')}"

    ticket = StructuredTool(
        name="create_ticket",
        description="Create a ticket in the tracker.",
        args_schema=TICKET_SCHEMA,
        func=create_ticket,
    )
    review = HumanInTheLoopMiddleware(
        interrupt_on={"create_ticket": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )
    return create_agent(
        model, gate_tools(gate, [ticket]), middleware=[review], checkpointer=checkpointer
    )


TWO_STEP_EFFECTS: list[str] = []


def two_reviews_in_one_node(checkpointer, *, gate, **_offers):  # type: ignore[no-untyped-def]
    """One node that sends, then asks for a second review and sends again. On the second
    resume LangGraph runs the node from its start, so the first send is called again."""
    from agent_runtime.gate import GateRefused

    def ask(name: str, args: dict) -> bool:  # type: ignore[type-arg]
        request = {
            "action_requests": [{"name": name, "args": args, "description": "send"}],
            "review_configs": [{"action_name": name, "allowed_decisions": ["approve", "reject"]}],
        }
        return interrupt(request)["decisions"][0]["type"] == "approve"

    def send_twice(state: State, config) -> State:  # type: ignore[no-untyped-def]
        results = []
        for n, recipient in enumerate(("a@example.com", "b@example.com"), start=1):
            args = {"recipient": recipient, "text": f"step {n}"}
            if not ask("send_external_message", args):
                return {"answer": f"step {n} rejected"}
            try:
                results.append(
                    gate.run(
                        config,
                        tool_name="send_external_message",
                        args=args,
                        effect=lambda n=n: TWO_STEP_EFFECTS.append(f"step {n}") or f"sent {n}",
                    )
                )
            except GateRefused as exc:
                return {"answer": str(exc)}
        return {"answer": "; ".join(results)}

    graph = StateGraph(State)
    graph.add_node("send_twice", send_twice)
    graph.add_edge(START, "send_twice")
    graph.add_edge("send_twice", END)
    return graph.compile(checkpointer=checkpointer)


def effect_in_a_node(checkpointer, **_offers):  # type: ignore[no-untyped-def]
    """Asks for a review, then acts in the node itself, without the gate: only the node's own
    answer shows that it acted, and no tool message or execution record does."""

    def act(state: State) -> State:
        args = {"recipient": "a@example.com", "text": "hi"}
        request = {
            "action_requests": [{"name": "send_external_message", "args": args}],
            "review_configs": [
                {"action_name": "send_external_message", "allowed_decisions": ["approve"]}
            ],
        }
        approved = interrupt(request)["decisions"][0]["type"] == "approve"
        return {"answer": "sent" if approved else "not sent"}

    graph = StateGraph(State)
    graph.add_node("act", act)
    graph.add_edge(START, "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)


# The publish workflow with a scripted LLM grader (a real model's path, without a provider).
LLM_GRADERS: list[Any] = []


def _llm_graded_publish(script: list[Any], *, wrong_first_total: bool = False):  # type: ignore[no-untyped-def]
    def factory(checkpointer, **offers):  # type: ignore[no-untyped-def]
        from agent_runtime.agents import rubric
        from agent_runtime.agents.publish_workflow import build_publish_workflow
        from tests.agent_runtime.scripted_grader import ScriptedGrader

        def drafter(request, sales, feedback):  # type: ignore[no-untyped-def]
            text = rubric.offline_draft(request, sales, feedback)
            if wrong_first_total and not feedback:
                return text.replace(f"Total: {sum(sales.values())}", "Total: 1")
            return text

        grader = ScriptedGrader(script=list(script))
        LLM_GRADERS.append(grader)
        return build_publish_workflow(
            checkpointer,
            workspace=offers["workspace"],
            model=grader,
            drafter=drafter,
            gate=offers.get("gate"),
            audit=offers.get("audit"),
        )

    return factory


def _scripts():  # type: ignore[no-untyped-def]
    from tests.agent_runtime.scripted_grader import NEEDS_SUMMARY, SATISFIED, verdict

    refused = verdict("failed", explanation="the rubric cannot be applied to this report")
    return {
        "revise_then_satisfied": [NEEDS_SUMMARY, SATISFIED],
        "satisfied": [SATISFIED],
        "failed": [refused],
        "never_satisfied": [NEEDS_SUMMARY] * 3,
        "unavailable": [RuntimeError("provider unavailable")],
    }


llm_revise_then_satisfied = _llm_graded_publish(_scripts()["revise_then_satisfied"])
llm_failed = _llm_graded_publish(_scripts()["failed"])
llm_never_satisfied = _llm_graded_publish(_scripts()["never_satisfied"])
llm_unavailable = _llm_graded_publish(_scripts()["unavailable"])
llm_after_a_wrong_total = _llm_graded_publish(_scripts()["satisfied"], wrong_first_total=True)


STUBBORN_LIMIT = 40
"""Proposals the stubborn sender makes before it gives up by itself."""


def stubborn_sender(checkpointer, *, policy, model, workspace, gate):  # type: ignore[no-untyped-def]
    """An agent that answers every refusal by proposing the very call the policy refuses
    again (a message to a domain outside the allowed ones), up to ``STUBBORN_LIMIT`` times."""
    from langchain_core.messages import AIMessage, ToolMessage

    from agent_runtime.agents.change_request import build_agent
    from agent_runtime.offline_model import OfflineChatModel

    class Stubborn(OfflineChatModel):
        def _reply(self, messages):  # type: ignore[no-untyped-def]
            tries = sum(isinstance(m, ToolMessage) for m in messages)
            if tries >= STUBBORN_LIMIT:
                return AIMessage(content="I give up.")
            call = {
                "name": "send_external_message",
                "args": {"recipient": "boss@elsewhere.org", "text": "again"},
                "id": f"call_stubborn_{tries}",
                "type": "tool_call",
            }
            return AIMessage(content="", tool_calls=[call])

    return build_agent(
        checkpointer, policy=policy, model=Stubborn(), workspace=workspace, gate=gate
    )


MANY_AT_ONCE = 6
"""Refused calls the many-at-once sender proposes in its one proposal."""


def many_refused_at_once(checkpointer, *, policy, model, workspace, gate):  # type: ignore[no-untyped-def]
    """An agent that proposes ``MANY_AT_ONCE`` calls the policy refuses in one message, and
    stops once told they were refused."""
    from langchain_core.messages import AIMessage, ToolMessage

    from agent_runtime.agents.change_request import build_agent
    from agent_runtime.offline_model import OfflineChatModel

    class Once(OfflineChatModel):
        def _reply(self, messages):  # type: ignore[no-untyped-def]
            if any(isinstance(m, ToolMessage) for m in messages):
                return AIMessage(content="Understood: I will not send them.")
            calls = [
                {
                    "name": "send_external_message",
                    "args": {"recipient": f"boss{n}@elsewhere.org", "text": "hi"},
                    "id": f"call_many_{n}",
                    "type": "tool_call",
                }
                for n in range(MANY_AT_ONCE)
            ]
            return AIMessage(content="", tool_calls=calls)

    return build_agent(checkpointer, policy=policy, model=Once(), workspace=workspace, gate=gate)


def _review_a_date(state: State) -> State:
    when = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)  # not JSON, and no schema to make it so
    interrupt(
        {
            "type": "review",
            "action": {"name": "schedule_launch", "args": {"at": when}},
            "allowed_decisions": ["approve", "reject"],
        }
    )
    return {"answer": "scheduled"}


def review_of_a_date(checkpointer):  # type: ignore[no-untyped-def]
    """A tool's own review whose arguments hold a Python object JSON cannot carry."""
    graph = StateGraph(State)
    graph.add_node("review", _review_a_date)
    graph.add_edge(START, "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=checkpointer)


class Wide(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    notes: Annotated[list[str], operator.add]


def _twice(state: Wide) -> Wide:
    """Two interrupts in one node: the first resume runs it again and stops at the second."""
    # A tuple: the checkpoint keeps it as a list, and so must what the engine is told.
    first = str(interrupt({"kind": "free-form", "question": "first?", "from": ("a", "b")}))
    second = str(interrupt({"kind": "free-form", "question": first}))
    # Ids of their own: LangGraph gives a message without one a new id at every read of a
    # step that ended partly (the parallel nodes below), so no two reads would compare equal.
    return {"messages": [AIMessage(f"{first}, {second}", id="twice")], "answer": first}


def _side(name: str):  # type: ignore[no-untyped-def]
    def ask(state: Wide) -> Wide:
        said = f"{name}: {interrupt({'kind': 'free-form', 'question': name})}"
        return {"messages": [AIMessage(said, id=name)], "notes": [said]}

    return ask


def stops_graph(checkpointer, *, output_schema=None):  # type: ignore[no-untyped-def]
    """Two interrupts in one node, then two parallel nodes that each interrupt (answered one
    at a time), then an end: each kind of place a thread may stop at."""
    graph = StateGraph(Wide, output_schema=output_schema)
    graph.add_node("twice", _twice)
    graph.add_node("left", _side("left"))
    graph.add_node("right", _side("right"))
    graph.add_edge(START, "twice")
    graph.add_edge("twice", "left")
    graph.add_edge("twice", "right")
    graph.add_edge("left", END)
    graph.add_edge("right", END)
    return graph.compile(checkpointer=checkpointer)


class _MessagesOnly(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


class _AnswerOnly(TypedDict, total=False):
    answer: str


def messages_output_graph(checkpointer):  # type: ignore[no-untyped-def]
    """``stops_graph`` whose output is its messages alone (as an agent's often is)."""
    return stops_graph(checkpointer, output_schema=_MessagesOnly)


def answer_output_graph(checkpointer):  # type: ignore[no-untyped-def]
    """``stops_graph`` whose output leaves its messages out."""
    return stops_graph(checkpointer, output_schema=_AnswerOnly)


def hidden_stops_graph(checkpointer):  # type: ignore[no-untyped-def]
    """``stops_graph`` tagged hidden: LangGraph streams nothing of its tasks, interrupts
    included."""
    return stops_graph(checkpointer).with_config(tags=[TAG_HIDDEN])


def review_then_answer(checkpointer, **_offers):  # type: ignore[no-untyped-def]
    """A reviewed send, in a graph whose output is its answer alone (its messages are not in
    it): where a run stopped is read back from the checkpoint."""

    def act(state: Wide) -> Wide:
        args = {"recipient": "a@example.com", "text": "hi"}
        request = {
            "action_requests": [{"name": "send_external_message", "args": args}],
            "review_configs": [
                {"action_name": "send_external_message", "allowed_decisions": ["approve"]}
            ],
        }
        answer = str(interrupt(request)["decisions"][0]["type"])
        return {"messages": [AIMessage(f"the send was {answer}d", id="answer")], "answer": answer}

    graph = StateGraph(Wide, output_schema=_AnswerOnly)
    graph.add_node("act", act)
    graph.add_edge(START, "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)


def long_call_ids_agent(checkpointer, *, model, workspace, gate):  # type: ignore[no-untyped-def]
    """The offline model's plans with tool-call ids of 300 characters (a model may make them
    as long as it likes), a reviewed send run through the gate."""

    from agent_runtime.offline_model import OfflineChatModel

    class LongIds(OfflineChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            result = super()._generate(messages, stop, run_manager, **kwargs)
            for generation in result.generations:
                for call in getattr(generation.message, "tool_calls", []):
                    if len(call["id"] or "") < 300:
                        call["id"] = f"{call['id']}_{'x' * 300}"
            return result

    return _reviewed_sends(LongIds(), checkpointer=checkpointer, workspace=workspace, gate=gate)


def failing_first_step(checkpointer, **_offers):  # type: ignore[no-untyped-def]
    """An agent whose first step raises (its run's failure is then what is to be recorded)."""

    def fail(state: State) -> State:
        raise RuntimeError("the model provider is down")

    graph = StateGraph(State)
    graph.add_node("fail", fail)
    graph.add_edge(START, "fail")
    graph.add_edge("fail", END)
    return graph.compile(checkpointer=checkpointer)


WORKING = threading.Event()
"""Set by ``held_first_step`` once its agent is at work."""
DONE_WORKING = threading.Event()
"""Set by a test to let that agent finish."""


def held_first_step(checkpointer, **_offers):  # type: ignore[no-untyped-def]
    """An agent at work (a long model call, say) until the test lets it finish."""

    def work(state: State) -> State:
        WORKING.set()
        assert DONE_WORKING.wait(60), "the test never let the agent finish"
        return {"answer": "done"}

    graph = StateGraph(State)
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile(checkpointer=checkpointer)


def one_call_id_twice_agent(checkpointer, *, model, workspace, gate):  # type: ignore[no-untyped-def]
    """The offline model's plans with every tool call of a message but the first under one
    id (a model may send the same id twice), each send reviewed and run through the gate."""

    from agent_runtime.offline_model import OfflineChatModel

    class OneId(OfflineChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            result = super()._generate(messages, stop, run_manager, **kwargs)
            for generation in result.generations:
                for call in getattr(generation.message, "tool_calls", [])[1:]:
                    call["id"] = "call_same"
            return result

    return _reviewed_sends(OneId(), checkpointer=checkpointer, workspace=workspace, gate=gate)


def _reviewed_sends(model, *, checkpointer, workspace, gate):  # type: ignore[no-untyped-def]
    """An agent of ``model`` with one tool, a send reviewed (approve or reject) and run
    through the gate."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import StructuredTool

    from agent_runtime.protect import gate_tools

    def send(recipient: str, text: str) -> str:
        workspace.record_effect("send_external_message", recipient=recipient, text=text)
        return f"sent to {recipient}"

    tool = StructuredTool.from_function(send, name="send_external_message", description="Send.")
    review = HumanInTheLoopMiddleware(
        interrupt_on={"send_external_message": {"allowed_decisions": ["approve", "reject"]}}
    )
    return create_agent(
        model, gate_tools(gate, [tool]), middleware=[review], checkpointer=checkpointer
    )
