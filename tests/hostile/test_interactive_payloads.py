"""Signed button clicks and modal submissions of any shape: a 4xx (or a 200 that tells the user
what is wrong), never a 5xx, and nothing changes but the audit of refused attempts."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bot.ids import CallbackId
from bot.sandbox import people
from tests.bot.flows import button, start_run
from tests.hostile.probes import HOSTILE_SETTINGS, json_values, snapshot

PUBLISH = 'publish_report {"path": "reports/weekly.md", "channel": "public"}'
USERS = [  # never an approver of the paused actions: a well-formed decision is refused
    {"id": people.OUTSIDER, "team_id": "T0SANDBOX"},
    {"id": people.REQUESTER, "team_id": "T0SANDBOX"},
]
CALLBACKS = [c.value for c in CallbackId] + ["nope"]
BLOCKS = ["reject_reason", "respond_answer", "arg:path", "arg:channel", "arg:recipient"]
INPUTS = ["reason", "answer", "value"]
ACTION_IDS = [
    "approval.approve",
    "approval.approve_all",
    "approval.reject",
    "approval.edit",
    "approval.view_args_page",
]


@pytest.fixture
def paused_publish(serve_bot, sqlite_url):  # type: ignore[no-untyped-def]
    """A card whose edit form has a text field, a select and radio buttons."""
    h = serve_bot(sqlite_url)
    _root, card = start_run(h, PUBLISH)
    return h, card


def _post(h, payload: Any):  # type: ignore[no-untyped-def]
    return h.driver.post(urlencode({"payload": json.dumps(payload)}))


def _choice(card, label: str) -> str:  # type: ignore[no-untyped-def]
    return button(card, label).value


def submission(card, *, callback: str, label: str, values: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A view submission as Slack sends it, from a user who may not decide the action."""
    return {
        "type": "view_submission",
        "team": {"id": "T0SANDBOX"},
        "user": dict(USERS[0]),
        "trigger_id": "1.2.x",
        "view": {
            "id": "V0FORGED",
            "type": "modal",
            "callback_id": callback,
            "private_metadata": _choice(card, label),
            "blocks": [{"type": "input", "block_id": b} for b in BLOCKS],
            "state": {"values": values},
        },
    }


def click(card, *, action_id: str, value: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {
        "type": "block_actions",
        "user": dict(USERS[0]),
        "team": {"id": "T0SANDBOX"},
        "container": {"type": "message", "channel_id": card.channel, "message_ts": card.ts},
        "channel": {"id": card.channel},
        "trigger_id": "1.2.x",
        "actions": [{"action_id": action_id, "block_id": "b", "type": "button", "value": value}],
    }


def _set(payload: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``path`` like ``view.state.values``; ``DELETE`` removes the key."""
    changed = copy.deepcopy(payload)
    *parents, last = path.split(".")
    target = changed
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value == "DELETE":
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return changed


DEEP = "[" * 900 + "]" * 900  # parses, then nests deeper than most code expects
REJECT = ("approval.reject_modal", "Reject", {"reject_reason": {"reason": {"value": "no"}}})
EDIT = ("approval.edit_modal", "Edit", {"arg:path": {"value": {"value": "reports/x.md"}}})
MALFORMED_SUBMISSIONS = [
    (REJECT, "view.state.values", "a string"),
    (REJECT, "view.state.values.reject_reason", "a string"),
    (REJECT, "view.state.values.reject_reason.reason", "a string"),
    (REJECT, "view.state.values.reject_reason.reason.value", {"not": "text"}),
    (REJECT, "view.state", []),
    (REJECT, "view.private_metadata", {"id": 1}),
    (REJECT, "view.private_metadata", "garbage"),
    (REJECT, "view.blocks", "not a list"),
    (REJECT, "view", "DELETE"),
    (REJECT, "view.type", "DELETE"),
    (REJECT, "view.callback_id", "DELETE"),
    (REJECT, "user", "DELETE"),
    (REJECT, "user", "U0MALLORY"),
    (EDIT, "view.state.values", "a string"),
    (EDIT, "view.state.values.arg:path", ["a list"]),
    (EDIT, "view.state.values.arg:path.value", 7),
    (EDIT, "view.state.values.arg:path", {"value": {"selected_option": "not an option"}}),
    (EDIT, "view.state.values.arg:channel", {"value": {"selected_option": {"value": "[" * 3000}}}),
    (EDIT, "view.state.values.arg:channel", {"value": {"selected_option": {"value": DEEP}}}),
    (EDIT, "view.blocks", [7, "x"]),
    (EDIT, "view.private_metadata", "garbage"),
]


def test_malformed_submissions_get_no_5xx_and_change_nothing(paused_publish):
    h, card = paused_publish
    before, wrong = snapshot(h), []
    for (callback, label, values), path, value in MALFORMED_SUBMISSIONS:
        good = submission(card, callback=callback, label=label, values=values)
        reply = _post(h, _set(good, path, value))
        if reply.status not in (200, 400) or snapshot(h) != before:
            wrong.append((path, str(value)[:40], reply.status))
    assert wrong == []


MALFORMED_CLICKS = [
    ("actions", "DELETE"),
    ("actions", []),
    ("actions", "approve"),
    ("actions.0", "not an object"),
    ("actions.0.value", {"not": "ours"}),
    ("actions.0.value", "not ours"),
    ("actions.0.action_id", 7),
    ("user", "DELETE"),
    ("user", {"name": "no id"}),
    ("team", "T0SANDBOX"),
    ("container", "C0CHANGES"),
    ("channel", ["C0CHANGES"]),
    ("trigger_id", {"x": 1}),
    ("view", "garbage"),
    ("view", {"id": "V1", "callback_id": "approval.review_modal", "private_metadata": 7}),
]


def test_malformed_clicks_get_no_5xx_and_change_nothing(paused):
    h, card = paused
    before, wrong = snapshot(h), []
    for action_id in ("approval.approve", "approval.approve_all", "approval.reject"):
        for path, value in MALFORMED_CLICKS:
            good = click(card, action_id=action_id, value=_choice(card, "Approve"))
            reply = _post(h, _set(good, path, value))
            if reply.status >= 500 or snapshot(h) != before:
                wrong.append((action_id, path, str(value)[:40], reply.status))
    assert wrong == []


input_state = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["plain_text_input", "static_select", "radio_buttons"]),
            "value": st.one_of(st.text(max_size=20), json_values),
            "selected_option": st.one_of(
                json_values, st.fixed_dictionaries({"value": st.one_of(st.text(), json_values)})
            ),
        },
    ),
)
state_values = st.one_of(
    json_values,
    st.dictionaries(
        st.one_of(st.sampled_from(BLOCKS), st.text(max_size=8)),
        st.one_of(
            json_values,
            st.dictionaries(
                st.one_of(st.sampled_from(INPUTS), st.text(max_size=8)), input_state, max_size=2
            ),
        ),
        max_size=3,
    ),
)
users = st.one_of(st.sampled_from(USERS), json_values)
LABELS = ("Reject", "Edit", "Approve")  # drawn as is, replaced by that button's real value
metadata = st.one_of(st.sampled_from(LABELS), json_values)


def _real(card, drawn: Any) -> Any:  # type: ignore[no-untyped-def]
    """The drawn payload with each button label replaced by the card's real value (this action
    at this version), so some payloads name a real action."""
    if isinstance(drawn, str):
        return _choice(card, drawn) if drawn in LABELS else drawn
    if isinstance(drawn, list):
        return [_real(card, item) for item in drawn]
    if isinstance(drawn, dict):
        return {key: _real(card, item) for key, item in drawn.items()}
    return drawn


def _submission(
    *, callback: str, metadata: Any, values: Any, blocks: Any, user: Any, drop: list[str]
) -> dict[str, Any]:
    view = {
        "id": "V0FORGED",
        "type": "modal",
        "callback_id": callback,
        "private_metadata": metadata,
        "blocks": blocks,
        "state": {"values": values},
    }
    payload = {"type": "view_submission", "user": user, "team": {"id": "T0SANDBOX"}, "view": view}
    for key in drop:
        payload.pop(key, None)
        view.pop(key, None)
    return payload


submissions = st.builds(
    _submission,
    callback=st.sampled_from(CALLBACKS),
    metadata=metadata,
    values=state_values,
    blocks=st.one_of(
        json_values,
        st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["input", "section"]), "block_id": st.sampled_from(BLOCKS)}
            ),
            max_size=3,
        ),
    ),
    user=users,
    drop=st.lists(
        st.sampled_from(["user", "view", "team", "type", "state", "private_metadata"]), max_size=2
    ),
)


def _click(*, action_id: str, value: Any, user: Any, **replaced: Any) -> dict[str, Any]:
    payload = {
        "type": "block_actions",
        "user": user,
        "team": {"id": "T0SANDBOX"},
        "container": {"type": "message", "channel_id": people.CHANNEL},
        "channel": {"id": people.CHANNEL},
        "trigger_id": "1.2.x",
        "actions": [{"action_id": action_id, "block_id": "b", "type": "button", "value": value}],
    }
    payload.update({key: drawn for key, drawn in replaced.items() if drawn is not None})
    return payload


clicks = st.builds(
    _click,
    action_id=st.sampled_from([*ACTION_IDS, "approval.review_page", "approval.review_all"]),
    value=metadata,
    user=users,
    actions=st.one_of(st.none(), json_values),
    view=st.one_of(
        st.none(),
        json_values,
        st.fixed_dictionaries(
            {
                "id": st.one_of(st.just("V0FORGED"), json_values),
                "callback_id": st.sampled_from(CALLBACKS),
                "private_metadata": metadata,
                "state": st.fixed_dictionaries({"values": state_values}),
            }
        ),
    ),
    container=st.one_of(st.none(), json_values),
)


texts = st.one_of(st.sampled_from(["", "1e999", "NaN", "-0", "[1]", '"x"', "null"]), st.text())
shaped_submissions = st.builds(  # Slack's shapes, any text in them: reaches the listeners
    _submission,
    callback=st.sampled_from(CALLBACKS),
    metadata=st.one_of(st.sampled_from(LABELS), st.text(max_size=80)),
    values=st.dictionaries(
        st.sampled_from(BLOCKS),
        st.dictionaries(
            st.sampled_from(INPUTS),
            st.fixed_dictionaries(
                {},
                optional={
                    "value": st.one_of(st.none(), texts),
                    "selected_option": st.one_of(
                        st.none(), st.fixed_dictionaries({"value": texts})
                    ),
                },
            ),
            max_size=2,
        ),
        max_size=4,
    ),
    blocks=st.just([{"type": "input", "block_id": b} for b in BLOCKS]),
    user=st.sampled_from(USERS),
    drop=st.just([]),
)
shaped_clicks = st.builds(
    _click,
    action_id=st.sampled_from([*ACTION_IDS, "approval.review_page", "approval.review_all"]),
    value=st.one_of(st.sampled_from(LABELS), st.text(max_size=80)),
    user=st.sampled_from(USERS),
)


@settings(HOSTILE_SETTINGS, max_examples=150)
@given(drawn=st.one_of(submissions, clicks, shaped_submissions, shaped_clicks))
def test_any_click_or_submission_gets_no_5xx_and_changes_nothing(paused_publish, drawn):
    h, card = paused_publish
    before = snapshot(h)
    payload = _real(card, drawn)
    reply = _post(h, payload)
    event(f"HTTP {reply.status}")
    assert reply.status < 500, (payload, reply)
    assert snapshot(h) == before
