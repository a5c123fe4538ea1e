"""An action's effect runs in one call of this process at a time: a hold is given back only
by its own caller, one never given back stops holding once stale, and one whose effect is
running never does."""

from __future__ import annotations

from agent_runtime.in_flight import STALE_AFTER, InFlight


def test_an_action_is_taken_once_until_given_back_or_stale() -> None:
    now = [100.0]
    running = InFlight(clock=lambda: now[0])
    first = running.take("act_1")
    assert first is not None and running.take("act_1") is None
    assert running.take("act_2") is not None, "another action is another hold"
    running.release("act_1", first)
    again = running.take("act_1")
    assert again is not None
    now[0] += STALE_AFTER - 1
    assert running.take("act_1") is None
    now[0] += 1
    assert running.take("act_1") is not None, "a hold never given back stops holding"


def test_a_hold_taken_over_is_not_given_back_by_its_first_caller() -> None:
    now = [100.0]
    running = InFlight(clock=lambda: now[0])
    first = running.take("act_1")
    now[0] += STALE_AFTER
    second = running.take("act_1")
    assert second is not None
    running.release("act_1", first)  # the first caller comes back at last
    assert running.take("act_1") is None, "the second caller's hold was given back for it"
    running.release("act_1", second)
    assert running.take("act_1") is not None


def test_a_hold_whose_effect_is_running_never_goes_stale() -> None:
    now = [100.0]
    running = InFlight(clock=lambda: now[0])
    hold = running.take("act_1")
    with running.running(hold):
        now[0] += 10 * STALE_AFTER  # an infrastructure change, say
        assert running.take("act_1") is None
    assert running.take("act_1") is None, "its result is kept after it: held meanwhile"
    now[0] += STALE_AFTER
    assert running.take("act_1") is not None, "ended and never given back: stale"
