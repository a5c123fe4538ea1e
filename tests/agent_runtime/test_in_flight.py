"""An action's effect runs in one call of this process at a time; a hold never given back
stops holding once stale."""

from __future__ import annotations

from agent_runtime.in_flight import STALE_AFTER, InFlight


def test_an_action_is_taken_once_until_given_back_or_stale() -> None:
    now = [100.0]
    running = InFlight(clock=lambda: now[0])
    assert running.take("act_1") and not running.take("act_1")
    assert running.take("act_2"), "another action is another hold"
    running.release("act_1")
    assert running.take("act_1")
    now[0] += STALE_AFTER - 1
    assert not running.take("act_1")
    now[0] += 1
    assert running.take("act_1"), "a hold never given back stops holding"
