"""Leases renewed while their work runs, all from one thread."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from agent_runtime.renewals import Renewals

WAIT = 10.0


class Counted:
    """A renewal that counts its calls, and the threads they ran on; set ``times`` is reached
    once it was called that often."""

    def __init__(self, times: int = 2, answer: bool = True) -> None:
        self.calls = 0
        self.threads: set[int] = set()
        self.times = times
        self.answer = answer
        self.reached = threading.Event()
        self.lost = threading.Event()

    def __call__(self) -> bool:
        self.calls += 1
        self.threads.add(threading.get_ident())
        if self.calls >= self.times:
            self.reached.set()
        return self.answer


def test_a_lease_is_renewed_again_and_again_while_its_work_runs() -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    renew = Counted(times=3)
    with renewals.kept("item", renew, lost=renew.lost.set):
        assert renew.reached.wait(WAIT), "renewed fewer than three times"
    assert not renew.lost.is_set()


def test_renewals_come_a_round_apart_not_sooner() -> None:
    """Each renewal is a statement: a lease is renewed once per ``every`` seconds, the first
    one ``every`` seconds after its work began (a lower bound: a busy machine only adds)."""
    renewals = Renewals(every=0.05, name="test-leases")
    renew = Counted(times=3)
    began = time.monotonic()
    with renewals.kept("item", renew, lost=renew.lost.set):
        assert renew.reached.wait(WAIT)
        took = time.monotonic() - began
    assert took >= 3 * 0.05 * 0.99, f"three renewals in {took:.3f} s"


def test_leases_kept_at_once_are_renewed_from_one_thread_not_the_callers() -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    renews = [Counted() for _ in range(5)]
    with (
        renewals.kept(0, renews[0], lost=renews[0].lost.set),
        renewals.kept(1, renews[1], lost=renews[1].lost.set),
        renewals.kept(2, renews[2], lost=renews[2].lost.set),
    ):
        assert all(r.reached.wait(WAIT) for r in renews[:3])
    for key in (3, 4):  # kept later, one after the other: the same thread still
        with renewals.kept(key, renews[key], lost=renews[key].lost.set):
            assert renews[key].reached.wait(WAIT)
    threads = set().union(*(r.threads for r in renews))
    assert len(threads) == 1 and threading.get_ident() not in threads


def test_a_lease_found_lost_is_told_once_and_renewed_no_more() -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    gone = Counted(times=1, answer=False)
    still = Counted(times=4)
    with (
        renewals.kept("gone", gone, lost=gone.lost.set),
        renewals.kept("still", still, lost=still.lost.set),
    ):
        assert gone.lost.wait(WAIT)
        assert still.reached.wait(WAIT)  # three rounds more for the other one
    assert gone.calls == 1


def test_a_renewal_that_fails_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    tried = Counted(times=3)

    def flaky() -> bool:
        if tried() and tried.calls == 1:
            raise ConnectionError("the database went away for a moment")
        return True

    with caplog.at_level(logging.ERROR), renewals.kept("item", flaky, lost=tried.lost.set):
        assert tried.reached.wait(WAIT)
    assert "could not renew the lease of item" in caplog.text
    assert not tried.lost.is_set()


def test_a_renewal_that_finds_the_lease_gone_after_its_work_ended_is_no_loss() -> None:
    """The work ended (done, its item finished) while its last renewal ran: that renewal
    finds no lease, and nobody is told it was taken over."""
    renewals = Renewals(every=0.01, name="test-leases")
    started, release = threading.Event(), threading.Event()
    lost = threading.Event()

    def last() -> bool:
        started.set()
        release.wait(WAIT)
        return False

    with renewals.kept("item", last, lost=lost.set):
        assert started.wait(WAIT)
    release.set()
    follower = Counted(times=1)  # the next round runs only after that renewal returned
    with renewals.kept("next", follower, lost=follower.lost.set):
        assert follower.reached.wait(WAIT)
    assert not lost.is_set()
