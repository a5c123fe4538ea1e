"""Whatever the agent sends, cards and modals stay valid Block Kit and agent text stays inert:
no mention, broadcast or link comes alive, no formatting applies to it, nothing hides in it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from agent_runtime.views import ActionView, ApprovalView, DecisionView, RunView
from bot.blocks.approval_card import approval_card
from bot.blocks.arguments import full_argument_pages
from bot.blocks.edit_modal import edit_modal, errors_on_fields, field_block_id, parse_edit
from bot.blocks.messages import run_result_message, run_root_message
from bot.blocks.modals import arguments_modal, reject_modal, respond_modal
from tests.bot.formatting import (
    all_strings,
    hidden_characters,
    mrkdwn_texts,
    outside_code,
    plain_text_objects,
)

HOSTILE = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U0BOSS>",
    "<!subteam^S123|@admins>",
    "<https://evil.example|Approve>",
    "<#C0GENERAL>",
    "&lt;!channel&gt;",
    "```",
    "`",
    "*bold* _it_ ~s~",
    "*:white_check_mark: Approved*",
    "Sign-offs: 1 of 1",
    "\n> quoted\n&gt; too",
    ":x: :rotating_light:",
    "pay\u202eexe.txt \u2066a\u2069 \u200e\u200f\u061c\u202a\u202b\u202c\u202d\u2067\u2068",
    "zero\u200bwidth\ufeff\u2060\u00ad\U000e0041\u3164\x1b\r\u2028\x85",
]
# Every agent text is marked with a sign the bot never writes, to find where it lands.
MARK = "§"
text = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=50),
    st.builds(
        lambda a, b: a * b, st.sampled_from([*HOSTILE, "é", "\U0001d518"]), st.integers(1, 900)
    ),
).map(lambda s: f"{MARK}{s}{MARK}")
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)
args_strategy = st.dictionaries(text, trees, max_size=12)
AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
# A live Slack token: a mention, broadcast, channel, user group or link.
LIVE = re.compile(r"<(?:[@#!]|https?:|mailto:)")
# Exactly the tokens the bot writes for these views: its two users and its dates.
OURS = re.compile(r"<@U0(?:ALICE|REL1)>|<!date\^\d+\^[^|>]*\|[^>]*>")


def _action(position: int, name: str, args: dict[str, Any], extra: dict[str, Any]) -> ActionView:
    return ActionView(
        id=f"act_{position:032x}",
        position=position,
        tool_name=name,
        args=args,
        description=extra.get("description", ""),
        risk="high",
        allowed_decisions=("approve", "edit", "reject", "respond"),
        approver_roles=("release-managers",),
        approvals_required=2,
        action_hash="a" * 64,
        operation_id="op_1",
        outcome=None,
        decisions=(DecisionView("U0REL1", "approve", extra.get("message"), AT, "a" * 64),),
        edited_args=extra.get("edited"),
        extra=extra.get("extra"),
    )


actions = st.builds(
    lambda pos, name, args, desc, msg, edited, preview, sub: _action(
        pos,
        name,
        args,
        {
            "description": desc,
            "message": msg,
            "edited": edited,
            "extra": {"preview": preview, "review_kind": desc[:20], "subagent": sub},
        },
    ),
    st.integers(0, 99),
    text,
    args_strategy,
    text,
    st.one_of(st.none(), text),
    st.one_of(st.none(), args_strategy),
    text,
    text,
)
approvals = st.builds(
    lambda acts, request, status: ApprovalView(
        id="apr_1",
        run=RunView("run_1", "U0ALICE", "C1", "1.0", request, "waiting", request),
        status=status,
        outcome=request,
        interrupt_id="i",
        policy_version="v1",
        requester_id="U0ALICE",
        expires_at=AT,
        card_channel="C1",
        card_ts="2.0",
        actions=tuple(dataclasses.replace(a, position=i) for i, a in enumerate(acts)),
    ),
    st.lists(actions, min_size=1, max_size=14),
    text,
    st.sampled_from(["pending", "resolved", "expired", "invalidated"]),
)


def agent_text_is_inert(payload: dict[str, Any]) -> None:
    """In formatted texts, agent text sits inside code only (so nothing formats it) and brings
    no live token; plain_text keeps its emoji shortcodes as text; no string hides characters."""
    for value in mrkdwn_texts(payload):
        assert not LIVE.search(OURS.sub("", value)), value
        assert MARK not in outside_code(value), value
        assert "`" not in outside_code(value), f"a code span was closed or cut: {value!r}"
    for obj in plain_text_objects(payload):
        assert MARK not in obj["text"] or obj.get("emoji") is False, obj
    for value in all_strings(payload):
        assert hidden_characters(value) == [], value


def valid_blocks(blocks: list[dict[str, Any]], limit: int) -> None:
    assert len(blocks) <= limit
    for raw in blocks:
        parsed = Block.parse(raw)
        assert parsed is not None, raw
        parsed.validate_json()
        if raw.get("type") == "actions":
            for element in raw["elements"]:
                assert len(element["value"]) <= 2000 and re.fullmatch(r"[\w:.-]+", element["value"])


FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(approvals)
def test_cards_are_valid_and_inert(approval):
    card = approval_card(approval)
    valid_blocks(card["blocks"], 50)
    agent_text_is_inert(card)
    for message in (run_root_message(approval.run), run_result_message(approval.run)):
        valid_blocks(message["blocks"], 50)
        agent_text_is_inert(message)


@FAST
@given(actions)
def test_modals_are_valid_and_inert(action):
    pages = full_argument_pages(
        tool_name=action.tool_name, args=action.args, preview=(action.extra or {}).get("preview")
    )
    modals = [
        reject_modal(action_id=action.id, tool_name=action.tool_name),
        respond_modal(action_id=action.id, tool_name=action.tool_name, question=action.description),
        edit_modal(
            action_id=action.id,
            tool_name=action.tool_name,
            schema={"properties": {}},
            current=action.args,
        ),
        *(arguments_modal(action_id=action.id, pages=pages, page=i) for i in range(len(pages))),
    ]
    for modal in modals:
        View(**modal).validate_json()
        valid_blocks(modal["blocks"], 100)
        assert len(modal["private_metadata"]) <= 3000
        agent_text_is_inert(modal)


SCHEMA = {
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "channel": {"enum": ["public", "internal"], "type": "string"},
        "notify": {"type": "boolean"},
        "copies": {"type": "integer"},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
    },
    "required": ["path", "channel"],
}
CURRENT = {
    "path": "a.md",
    "content": "x" * 200,
    "channel": "public",
    "notify": True,
    "copies": 2,
    "ratio": 0.5,
    "tags": ["a"],
    "meta": {"k": [1]},
}


def test_edit_modal_has_a_widget_per_argument_type_and_round_trips():
    modal = edit_modal(action_id="act_1", tool_name="t", schema=SCHEMA, current=CURRENT)
    View(**modal).validate_json()
    widgets = {b["block_id"]: b["element"] for b in modal["blocks"] if b["type"] == "input"}
    assert {k: v["type"] for k, v in widgets.items()} == {
        "arg:path": "plain_text_input",
        "arg:content": "plain_text_input",
        "arg:channel": "static_select",
        "arg:notify": "radio_buttons",
        "arg:copies": "number_input",
        "arg:ratio": "number_input",
        "arg:tags": "plain_text_input",
        "arg:meta": "plain_text_input",
        "arg:maybe": "number_input",
    }
    assert widgets["arg:content"]["multiline"] and not widgets["arg:path"]["multiline"]
    assert (
        widgets["arg:ratio"]["is_decimal_allowed"]
        and not widgets["arg:copies"]["is_decimal_allowed"]
    )

    state = {"values": {}}
    for block_id, element in widgets.items():
        if element["type"] in ("static_select", "radio_buttons"):
            value = {"type": element["type"], "selected_option": element.get("initial_option")}
        else:
            value = {"type": element["type"], "value": element.get("initial_value")}
        state["values"][block_id] = {"value": value}
    args, errors = parse_edit({"state": state}, schema=SCHEMA, current=CURRENT)
    assert errors == {} and args == CURRENT


def test_edit_parse_errors_point_at_the_field():
    state = {
        "values": {
            "arg:copies": {"value": {"type": "number_input", "value": "two"}},
            "arg:meta": {"value": {"type": "plain_text_input", "value": "{not json"}},
        }
    }
    _args, errors = parse_edit({"state": state}, schema=SCHEMA, current=CURRENT)
    assert set(errors) == {"arg:copies", "arg:meta"}
    assert json.dumps(errors)


@pytest.mark.parametrize(
    ("block", "typed"),
    [
        ("arg:ratio", "nan"),
        ("arg:ratio", "inf"),
        ("arg:ratio", "1e999"),
        ("arg:meta", '{"k": NaN}'),
        ("arg:meta", "[Infinity]"),
        ("arg:tags", "[1e999]"),
    ],
)
def test_a_number_json_cannot_hold_is_an_error_on_its_field(block, typed):
    """NaN and infinities are not JSON: PostgreSQL refuses to store them, and no tool's
    bounds hold for them. The reviewer is told on the field, not answered "busy"."""
    element = "number_input" if block == "arg:ratio" else "plain_text_input"
    state = {"values": {block: {"value": {"type": element, "value": typed}}}}
    args, errors = parse_edit({"state": state}, schema=SCHEMA, current=CURRENT)
    assert set(errors) == {block}, args


def test_a_schema_whose_properties_are_booleans_gets_json_fields():
    """JSON schema allows ``true`` for "anything" (some MCP servers emit it)."""
    schema = {"properties": {"anything": True, "nothing": False, "mixed": {"anyOf": [True]}}}
    current = {"anything": {"a": 1}, "mixed": 2}
    modal = edit_modal(action_id="act_1", tool_name="t", schema=schema, current=current)
    View(**modal).validate_json()
    state = {"values": {"arg:anything": {"value": {"type": "plain_text_input", "value": "[1]"}}}}
    args, errors = parse_edit({"state": state}, schema=schema, current=current)
    assert errors == {} and args == {"anything": [1], "mixed": 2}


def test_a_choice_the_modal_could_not_show_is_kept_not_dropped():
    """A select or a yes/no shows no choice when the current value is not one of those offered
    (not valid): submitting the form without touching it keeps the value, so the reviewer
    approves only what they changed."""
    schema = {
        "properties": {
            "region": {"enum": [f"r{n}" for n in range(50)]},
            "notify": {"type": "boolean"},
        },
        "required": ["region", "notify"],
    }
    current = {"region": "r120", "notify": "yes"}
    modal = edit_modal(action_id="act_1", tool_name="t", schema=schema, current=current)
    widgets = {b["block_id"]: b["element"] for b in modal["blocks"] if b["type"] == "input"}
    assert "initial_option" not in widgets["arg:region"]
    assert "initial_option" not in widgets["arg:notify"]
    state = {
        "values": {
            "arg:region": {"value": {"type": "static_select", "selected_option": None}},
            "arg:notify": {"value": {"type": "radio_buttons", "selected_option": None}},
        }
    }
    args, errors = parse_edit({"state": state}, schema=schema, current=current)
    assert errors == {} and args == current


def _widgets(modal: dict[str, Any]) -> dict[str, dict[str, Any]]:
    View(**modal).validate_json()
    valid_blocks(modal["blocks"], 100)
    return {b["block_id"]: b["element"] for b in modal["blocks"] if b["type"] == "input"}


def _modal_widgets(schema: dict[str, Any], current: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _widgets(edit_modal(action_id="a", tool_name="t", schema=schema, current=current))


def _labels(select: dict[str, Any]) -> list[str]:
    return [o["text"]["text"] for o in select["options"]]


def _picked(element: dict[str, Any], option: dict[str, Any] | None) -> dict[str, Any]:
    return {"value": {"type": element["type"], "selected_option": option}}


def test_a_choice_longer_than_a_slack_option_holds_is_offered_and_taken_whole():
    """Slack refuses a select whose option value is over 150 characters (the whole modal
    would not open): a choice short to read but long as JSON (each letter here is six
    characters escaped) is offered under a digest of itself and read back whole."""
    long = "Zürich, Genève, Düsseldorf: " + "é" * 30
    schema = {"properties": {"target": {"enum": ["staging", long]}}, "required": ["target"]}
    current = {"target": "staging"}
    select = _widgets(edit_modal(action_id="a", tool_name="t", schema=schema, current=current))[
        "arg:target"
    ]
    offered = {o["text"]["text"]: o for o in select["options"]}
    assert set(offered) == {"staging", long}
    assert all(len(o["value"]) <= 150 for o in select["options"])
    state = {"values": {"arg:target": _picked(select, offered[long])}}
    assert parse_edit({"state": state}, schema=schema, current=current) == ({"target": long}, {})

    # Drawn from a schema that offered a choice the tool no longer has: an error, not a guess.
    gone = {"properties": {"target": {"enum": ["staging", long + "!"]}}}
    _args, errors = parse_edit({"state": state}, schema=gone, current=current)
    assert set(errors) == {"arg:target"} and "no longer" in errors["arg:target"]


def test_more_choices_than_a_select_holds_are_typed_and_checked_by_the_schema():
    """A select holds 100 options: a reviewer could not pick the others, nor see the current
    one among them. More choices than that are a text field holding the current value."""
    schema = {
        "properties": {
            "region": {"enum": [f"r{n}" for n in range(150)]},
            "level": {"enum": [1, 2]},
        },
        "required": ["region"],
    }
    current = {"region": "r120", "level": 2}
    field = _widgets(edit_modal(action_id="a", tool_name="t", schema=schema, current=current))[
        "arg:region"
    ]
    assert (field["type"], field["initial_value"]) == ("plain_text_input", "r120")
    typed = {"values": {"arg:region": {"value": {"type": "plain_text_input", "value": "r130"}}}}
    assert parse_edit({"state": typed}, schema=schema, current=current) == (
        {"region": "r130", "level": 2},
        {},
    )
    numbers = {"properties": {"n": {"enum": list(range(120))}}}
    field = _widgets(edit_modal(action_id="a", tool_name="t", schema=numbers, current={"n": 7}))[
        "arg:n"
    ]
    assert field["initial_value"] == "7"
    typed = {"values": {"arg:n": {"value": {"type": "plain_text_input", "value": "99"}}}}
    assert parse_edit({"state": typed}, schema=numbers, current={"n": 7}) == ({"n": 99}, {})


def test_choices_that_would_read_alike_are_typed_never_picked_blind():
    """A select shows each choice in 75 characters: two long choices that differ only past
    that, or the number 1 and the string "1", would look the same. The reviewer then types
    the value they mean, in full, instead of picking one of two look-alikes."""
    head = "run the migration on every production shard, then " + "x" * 30
    schema = {
        "properties": {
            "command": {"enum": [head + " --dry-run", head + " --force"]},
            "level": {"enum": [1, "1"]},
            "spaced": {"enum": ["eu  west", "eu west"]},
            "cased": {"enum": ["Prod", "prod"]},
            "fine": {"enum": [1, "one", True, None]},
        },
        "required": ["command", "level", "fine"],
    }
    current = {"command": head + " --dry-run", "level": 1, "fine": 1, "spaced": "eu west"}
    widgets = _modal_widgets(schema, current)
    assert widgets["arg:command"]["initial_value"] == head + " --dry-run"
    assert {widgets[b]["type"] for b in ("arg:spaced", "arg:cased")} == {"plain_text_input"}
    assert _labels(widgets["arg:level"]) == ["1", '"1"']  # not all strings: each as JSON
    assert _labels(widgets["arg:fine"]) == ["1", '"one"', "true", "null"]
    typed = {"values": {"arg:cased": {"value": {"type": "plain_text_input", "value": "prod"}}}}
    args, errors = parse_edit({"state": typed}, schema=schema, current={"cased": "Prod"})
    assert (args, errors) == ({"cased": "prod"}, {})


def test_a_field_drawn_from_another_schema_is_an_error_not_a_guess():
    """The tool changed between opening the form and saving it (its choices no longer fit a
    select, or now do): what was entered may mean something else now, so it is refused."""
    many = {"properties": {"region": {"enum": [f"r{n}" for n in range(150)]}}}
    few = {"properties": {"region": {"enum": [f"r{n}" for n in range(50)]}}}
    current = {"region": "r10"}
    typed = {"values": {"arg:region": {"value": {"type": "plain_text_input", "value": "r130"}}}}
    args, errors = parse_edit({"state": typed}, schema=few, current=current)
    assert set(errors) == {"arg:region"} and args == current
    select = _modal_widgets(few, current)["arg:region"]
    state = {"values": {"arg:region": _picked(select, select["options"][3])}}
    _args, errors = parse_edit({"state": state}, schema=many, current=current)
    assert set(errors) == {"arg:region"}


def test_a_typed_choice_emptied_is_left_out_as_any_text_field_and_non_strings_are_json():
    """Slack marks an optional field so: emptied, the argument is left out (the tool's schema
    refuses that for a required one, on the field)."""
    schema = {"properties": {"n": {"enum": list(range(120))}}}
    modal = edit_modal(action_id="a", tool_name="t", schema=schema, current={"n": 7})
    (field,) = [b for b in modal["blocks"] if b["type"] == "input"]
    assert (field["label"]["text"], field["element"]["initial_value"]) == ("n (JSON)", "7")
    empty = {"values": {"arg:n": {"value": {"type": "plain_text_input", "value": None}}}}
    assert parse_edit({"state": empty}, schema=schema, current={"n": 7}) == ({}, {})


def test_an_optional_select_offers_only_the_tools_choices():
    """Nothing is added to a select that the reviewer would approve unseen (leaving an
    argument out means whatever default the tool then takes)."""
    schema = {"properties": {"channel": {"enum": ["public", "internal"], "default": "public"}}}
    select = _modal_widgets(schema, {"channel": "internal"})["arg:channel"]
    assert _labels(select) == ["public", "internal"]
    assert select["initial_option"]["text"]["text"] == "internal"


def test_a_field_that_opened_empty_and_stayed_so_keeps_its_value():
    """A null shows as an empty box: saving it untouched must not drop the argument, which
    would approve whatever default the tool then fills in, unseen."""
    schema = {
        "properties": {
            "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "live"},
            "region": {"enum": [*(f"r{n}" for n in range(120)), None], "default": "r1"},
        }
    }
    schema["properties"]["copies"] = {"type": "integer", "default": 1}
    schema["properties"]["meta"] = {"type": "object"}
    current = {"mode": None, "region": None, "copies": "all", "meta": ""}
    widgets = _modal_widgets(schema, current)
    assert not any("initial_value" in widgets[f"arg:{n}"] for n in ("mode", "region", "copies"))
    assert widgets["arg:meta"]["initial_value"] == '""'
    untouched = {
        "values": {
            f"arg:{name}": {"value": {"type": widgets[f"arg:{name}"]["type"], "value": None}}
            for name in ("mode", "region", "copies")
        }
    }
    assert parse_edit({"state": untouched}, schema=schema, current=current) == (current, {})
    # A field that showed something and was emptied is left out, whatever it held.
    cleared = {"values": {"arg:meta": {"value": {"type": "plain_text_input", "value": ""}}}}
    args, errors = parse_edit({"state": cleared}, schema=schema, current=current)
    assert (errors, "meta" in args) == ({}, False)


def test_errors_on_no_field_of_the_form_name_their_argument_and_hide_no_other():
    """The whole arguments, or one kept out of the form, have no field: their errors go on
    the first one, with the argument they are about, alongside that field's own."""
    fields = ["arg:path", "arg:channel"]
    by_name = {
        "path": "Enter a path.",
        "(arguments)": "path and channel cannot both be public.",
        "body": "Too long.",
        "channel": "Not one of the choices.",
    }
    assert errors_on_fields(by_name, fields) == {
        "arg:path": "Enter a path.; (arguments): path and channel cannot both be public.; "
        "body: Too long.",
        "arg:channel": "Not one of the choices.",
    }
    assert errors_on_fields({"(arguments)": "No."}, []) == {field_block_id("(arguments)"): "No."}
