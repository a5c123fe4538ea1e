"""Recording an interrupt: decisions both sides allow, operation ids, normalized arguments."""

from __future__ import annotations

import datetime as dt
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import create_model

from agent_runtime.catalog import ToolCatalog
from agent_runtime.policy import load_policy
from agent_runtime.recording import POLICY_VETO, allowed_decisions, build_request, operation_id
from agent_runtime.wire import ActionSpec, PendingInterrupt
from store.models import Run


def test_decisions_are_what_both_the_graph_and_the_policy_allow():
    assert allowed_decisions(("approve", "edit", "reject"), ("approve", "reject")) == [
        "approve",
        "reject",
    ]


def test_when_graph_and_policy_share_nothing_only_a_reject_is_left():
    """Fail closed: never fall back to what the graph alone offers."""
    assert allowed_decisions(("approve", "edit", "reject"), ("respond",)) == ["reject"]
    assert allowed_decisions(("approve", "edit"), ("respond",)) == []


def test_identical_calls_get_distinct_operation_ids():
    args = {"recipient": "a@example.com", "text": "hi"}
    first, second = operation_id("run", "send", args, 0), operation_id("run", "send", args, 1)
    assert first != second
    assert first == operation_id("run", "send", dict(reversed(args.items())), 0), "canonical"


SEND_ARGS = {"recipient": "a@example.com", "text": "hi"}
REVIEWABLE = ("approve", "reject")


def _tool(name: str, **fields: type) -> StructuredTool:
    """A tool the catalog knows the arguments of (only arguments checked can be exempt)."""
    schema = create_model(f"{name}_args", **{k: (v, ...) for k, v in fields.items()})  # type: ignore[call-overload]
    return StructuredTool.from_function(
        lambda **_kw: "", name=name, description=name, args_schema=schema
    )


def _recorded(*specs: tuple[str, dict[str, Any]], ids: list[str | None], turn: list[str]):  # type: ignore[no-untyped-def]
    """The actions an interrupt of these calls is recorded as, under the shipped policy."""
    run = Run(id="run_1", team_id="T1", requester_id="U0ALICE", channel_id="C1", request_text="x")
    pending = PendingInterrupt(
        interrupt_id="i1",
        kind="hitl_batch",
        actions=tuple(
            ActionSpec(
                name=name, args=args, description="", allowed_decisions=("approve", "reject")
            )
            for name, args in specs
        ),
    )
    _request, actions = build_request(
        run,
        pending,
        policy=load_policy(None),
        catalog=ToolCatalog(
            [
                _tool("read_public_report", path=str),
                _tool("send_external_message", recipient=str, text=str),
            ]
        ),
        now=dt.datetime.now(dt.UTC),
        tool_call_ids=ids,
        turn_call_ids=turn,
    )
    return actions


def test_a_reviewed_call_sharing_its_id_with_a_call_not_under_review_is_refused():
    """The model's turn holds a call that is not reviewed (a read, say) under the same id:
    a reject of the reviewed one would drop it too, and its decision could not be told apart."""
    (send,) = _recorded(("send_external_message", SEND_ARGS), ids=["c1"], turn=["c0", "c1", "c1"])
    assert send.outcome == "rejected"
    assert "c1 for more than one call" in send.extra[POLICY_VETO]
    (alone,) = _recorded(("send_external_message", SEND_ARGS), ids=["c1"], turn=["c0", "c1"])
    assert alone.outcome is None and POLICY_VETO not in (alone.extra or {})


def test_an_exempt_call_sharing_its_id_with_a_reviewed_one_is_refused_with_it():
    """A reject of the reviewed one would drop it too, and the record of what each returned
    would credit it with the other's answer: both are refused, and the agent told why."""
    read, send = _recorded(
        ("read_public_report", {"path": "reports/weekly.md"}),
        ("send_external_message", SEND_ARGS),
        ids=["c1", "c1"],
        turn=["c1", "c1"],
    )
    assert (read.exempt, read.outcome) == (False, "rejected")
    assert send.outcome == "rejected"


def test_calls_all_exempt_from_review_are_left_alone_though_their_id_is_shared():
    """Nobody reviews them, and a refusal would count towards stopping the agent."""
    report = ("read_public_report", {"path": "reports/weekly.md"})
    first, second = _recorded(report, report, ids=["c1", "c1"], turn=["c1", "c1", "c2"])
    assert [(a.exempt, a.outcome) for a in (first, second)] == [(True, "approved")] * 2


def test_a_turn_that_does_not_hold_the_reviewed_calls_says_nothing_of_their_ids():
    """A subagent's calls are in a message of its own, not in its parent's turn (the parent's
    ``task`` calls)."""
    (send,) = _recorded(("send_external_message", SEND_ARGS), ids=["c1"], turn=["t1", "t1"])
    assert send.outcome is None


def test_a_shared_id_keeps_the_policy_s_own_reason_first():
    outside = {"recipient": "a@elsewhere.org", "text": "hi"}
    (send,) = _recorded(("send_external_message", outside), ids=["c1"], turn=["c1", "c1"])
    veto = send.extra[POLICY_VETO]
    assert "example.com" in veto.split("the agent sent")[0], veto
    assert "c1 for more than one call" in veto
