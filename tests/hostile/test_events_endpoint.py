"""Hostile requests to /slack/events: always a 4xx or a clear answer, never a 5xx, and nothing
changes but the audit of refused attempts."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sandbox import people
from tests.bot.flows import button, result_message
from tests.hostile.probes import HOSTILE_SETTINGS, json_values, snapshot

ACTION_IDS = [
    "approval.approve",
    "approval.reject",
    "approval.edit",
    "approval.respond",
    "approval.approve_all",
    "approval.view_args",
    "approval.view_args_page",
    "nope",
]


def _block_action(card, action_id, value, *, user=None, team=None, drop=()):  # type: ignore[no-untyped-def]
    payload = {
        "type": "block_actions",
        "user": {"id": user or people.RELEASE_MANAGER, "team_id": team or "T0SANDBOX"},
        "team": {"id": team or "T0SANDBOX"},
        "container": {"type": "message", "channel_id": card.channel, "message_ts": card.ts},
        "channel": {"id": card.channel},
        "trigger_id": "1.2.bad",
        "actions": [{"action_id": action_id, "block_id": "b", "value": value, "type": "button"}],
    }
    for key in drop:
        payload.pop(key, None)
    return payload


event_bodies = st.builds(
    lambda event, extra: json.dumps({"type": "event_callback", "event": event, **extra}),
    st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"type": st.sampled_from(["subteam_updated", "message", "app_home_opened"])},
            optional={
                key: json_values
                for key in ("subteam", "subteam_id", "message", "team", "user_team", "channel")
            },
        ),
    ),
    st.dictionaries(
        st.sampled_from(["team_id", "enterprise_id", "authorizations", "is_ext_shared_channel"]),
        json_values,
        max_size=2,
    ),
)


@HOSTILE_SETTINGS
@given(
    body=st.one_of(
        event_bodies,
        st.text(max_size=200),
        st.builds(lambda v: urlencode({"payload": json.dumps(v)}), json_values),
        st.builds(lambda v: urlencode({"payload": v}), st.text(max_size=100)),
        st.builds(json.dumps, json_values),
        st.builds(
            urlencode,
            st.dictionaries(st.text(max_size=12), st.text(max_size=20), max_size=5),
        ),
    ),
    content_type=st.sampled_from(
        ["application/x-www-form-urlencoded", "application/json", "text/plain"]
    ),
)
def test_signed_garbage_never_gets_a_5xx_or_changes_state(paused, body, content_type):
    h, _card = paused
    before = snapshot(h)
    reply = h.driver.post(body, content_type=content_type)
    assert reply.status < 500, (reply.status, body)
    assert snapshot(h) == before


@pytest.mark.parametrize(
    "event",
    ["x", [1], None, 3, {"type": 1}, {"no": "type"}, {"type": "subteam_updated", "subteam": "x"}],
)
def test_a_signed_event_that_is_not_an_event_object_is_a_400(paused, event):
    h, _card = paused
    before = snapshot(h)
    body = json.dumps({"type": "event_callback", "team_id": "T0SANDBOX", "event": event})
    assert h.driver.post(body, content_type="application/json").status == 400
    assert snapshot(h) == before


@HOSTILE_SETTINGS
@given(
    action_id=st.sampled_from(ACTION_IDS),
    value=st.one_of(st.text(max_size=80), st.sampled_from(["", "act_" + "0" * 32, "apr_x:9"])),
    drop=st.lists(st.sampled_from(["user", "team", "container", "channel", "actions"]), max_size=2),
)
def test_malformed_or_forged_clicks_are_refused_without_state_change(
    paused, action_id, value, drop
):
    h, card = paused
    before = snapshot(h)
    payload = _block_action(card, action_id, value, drop=tuple(drop))
    reply = h.driver.post(urlencode({"payload": json.dumps(payload)}))
    assert reply.status < 500
    assert snapshot(h) == before


def test_unsigned_wrongly_signed_stale_and_oversize_requests_are_4xx(paused):
    h, card = paused
    before = snapshot(h)
    approve = button(card, "Approve")
    good = urlencode(
        {
            "payload": json.dumps(
                h.driver.block_action_payload(
                    user=people.RELEASE_MANAGER, message=card, button=approve
                )
            )
        }
    )
    assert h.driver.post(good, signature="").status == 401
    assert h.driver.post(good, signature="v0=" + "f" * 64).status == 401
    assert h.driver.post(good, signature="v1=abc").status == 401
    assert h.driver.post(good, timestamp=int(time.time()) - 3600).status == 401
    assert h.driver.post(good, timestamp=int(time.time()) + 3600).status == 401
    assert _declared_size_status(h.url, 2 * 1024 * 1024) == 413
    assert snapshot(h) == before


def _declared_size_status(url: str, size: int) -> int:
    """An oversize body is refused from its Content-Length, before it is read."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("POST", "/slack/events")
    conn.putheader("Content-Type", "application/x-www-form-urlencoded")
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def test_a_replayed_click_is_told_it_is_already_decided(paused):
    h, card = paused
    approve = button(card, "Approve")
    payload = urlencode(
        {
            "payload": json.dumps(
                h.driver.block_action_payload(
                    user=people.RELEASE_MANAGER, message=card, button=approve
                )
            )
        }
    )
    ts = int(time.time())
    assert h.driver.post(payload, timestamp=ts).status == 200
    result_message(h, h.state.message(card.channel, card.thread_ts))  # the resume is over
    after_first = snapshot(h)
    assert h.driver.post(payload, timestamp=ts).status == 200  # the very same signed request
    note = h.state.wait_for(lambda: h.state.ephemerals_for(people.RELEASE_MANAGER))
    assert note[-1].text == "This action has already been decided; nothing changed."
    assert snapshot(h)[:3] == after_first[:3]


def test_a_click_from_another_workspace_is_refused(paused):
    h, card = paused
    before = snapshot(h)
    approve = button(card, "Approve")
    reply = h.driver.click(
        user=people.RELEASE_MANAGER, message=card, button=approve, team_id="T0OTHER"
    )
    assert reply.status == 200
    note = h.state.wait_for(lambda: h.state.ephemerals_for(people.RELEASE_MANAGER))
    assert "another workspace" in note[-1].text
    assert snapshot(h) == before
