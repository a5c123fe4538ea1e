"""Leases renewed while their work runs, by threads every lease shares."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import pytest

from agent_runtime.renewals import RENEWING_THREADS, Renewals

WAIT = 10.0


class Counted:
    """A renewal that counts its calls, and the threads they ran on; ``reached`` is set once
    it was called ``times`` times, ``wait_calls`` waits for any count."""

    def __init__(self, times: int = 2, answer: bool = True) -> None:
        self.calls = 0
        self.threads: set[threading.Thread] = set()
        self.times = times
        self.answer = answer
        self.reached = threading.Event()
        self.lost = threading.Event()
        self.counted = threading.Condition()

    def __call__(self) -> bool:
        with self.counted:
            self.calls += 1
            self.threads.add(threading.current_thread())
            self.counted.notify_all()
        if self.calls >= self.times:
            self.reached.set()
        return self.answer

    def wait_calls(self, calls: int) -> bool:
        with self.counted:
            return self.counted.wait_for(lambda: self.calls >= calls, timeout=WAIT)


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


def test_leases_are_renewed_on_a_few_shared_threads_not_one_each_nor_the_callers() -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    renews = [Counted() for _ in range(3 + 2 * RENEWING_THREADS)]
    with contextlib.ExitStack() as kept:
        for key, renew in enumerate(renews[:3]):
            kept.enter_context(renewals.kept(key, renew, lost=renew.lost.set))
        assert all(r.reached.wait(WAIT) for r in renews[:3])
    for key, renew in enumerate(renews[3:], start=3):  # one after the other: the same threads
        with renewals.kept(key, renew, lost=renew.lost.set):
            assert renew.reached.wait(WAIT)
    threads = set().union(*(r.threads for r in renews))
    assert len(threads) <= RENEWING_THREADS and threading.current_thread() not in threads


def test_a_lease_found_lost_is_told_once_and_renewed_no_more() -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    gone = Counted(times=1, answer=False)
    told: list[str] = []
    still = Counted(times=4)

    def lost() -> None:
        told.append("gone")
        gone.lost.set()

    with (
        renewals.kept("gone", gone, lost=lost),
        renewals.kept("still", still, lost=still.lost.set),
    ):
        assert gone.lost.wait(WAIT)
        assert still.wait_calls(still.calls + 3)  # three rounds more for the other one
    assert (gone.calls, told) == (1, ["gone"])


def test_a_loss_that_cannot_be_told_stops_no_other_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Telling of a lost lease fails (its log, its metric): the others are renewed still."""
    renewals = Renewals(every=0.01, name="test-leases")
    gone = Counted(times=1, answer=False)
    still = Counted()
    tried = threading.Event()

    def cannot_tell() -> None:
        tried.set()
        raise RuntimeError("the metrics are gone")

    with (
        caplog.at_level(logging.ERROR),
        renewals.kept("gone", gone, lost=cannot_tell),
        renewals.kept("still", still, lost=still.lost.set),
    ):
        assert tried.wait(WAIT)
        assert still.wait_calls(still.calls + 3)
    assert "the metrics are gone" in caplog.text


def test_a_thread_that_cannot_start_is_started_at_a_later_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No thread to renew on ("can't start new thread"): the lease is renewed once one can be
    started, not left waiting for a renewal that never comes."""
    renewals = Renewals(every=0.01, name="test-leases")
    refused: list[str] = []
    start = threading.Thread.start

    def start_once_refused(thread: threading.Thread) -> None:
        if thread.name.endswith("-worker") and not refused:
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_once_refused)
    renew = Counted()
    with renewals.kept("item", renew, lost=renew.lost.set):
        assert renew.reached.wait(WAIT)
    assert refused == ["test-leases-worker"]


def test_its_threads_end_once_idle_and_start_again_for_a_new_lease() -> None:
    renewals = Renewals(every=0.01, name="test-idle-leases", idle=0.05)
    first = Counted()
    with renewals.kept("first", first, lost=first.lost.set):
        assert first.reached.wait(WAIT)
    assert _gone("test-idle-leases"), "its threads stayed with nothing to renew"
    again = Counted()
    with renewals.kept("again", again, lost=again.lost.set):
        assert again.reached.wait(WAIT)


def _gone(prefix: str) -> bool:
    """Waits (up to WAIT each) for the threads named ``prefix...`` to end; ``True`` if none is
    alive then."""
    for thread in [t for t in threading.enumerate() if t.name.startswith(prefix)]:
        thread.join(WAIT)
    return not any(t.name.startswith(prefix) for t in threading.enumerate())


def test_a_renewal_that_waits_holds_up_no_other_lease() -> None:
    """One renewal waits (for a pooled connection, a row lock): the others go on."""
    renewals = Renewals(every=0.01, name="test-leases")
    waiting, release = threading.Event(), threading.Event()

    calls: list[str] = []

    def stuck() -> bool:
        calls.append("stuck")
        waiting.set()
        return release.wait(WAIT)

    other = Counted(times=5)
    try:
        with (
            renewals.kept("stuck", stuck, lost=release.set),
            renewals.kept("other", other, lost=other.lost.set),
        ):
            assert waiting.wait(WAIT)
            assert other.reached.wait(WAIT), "the other lease waited for the stuck renewal"
            assert calls == ["stuck"], "renewed again while its renewal was under way"
    finally:
        release.set()


def test_the_same_key_kept_twice_is_renewed_for_each_until_each_ends() -> None:
    """Two workers of one process on one item (one took it over after its lease lapsed): the
    first to end must not end the other's renewals."""
    renewals = Renewals(every=0.01, name="test-leases")
    first, second = Counted(times=1), Counted(times=3)
    with renewals.kept("item", second, lost=second.lost.set):
        with renewals.kept("item", first, lost=first.lost.set):
            assert first.reached.wait(WAIT)
        assert second.wait_calls(second.calls + 2), "renewed no more once the first ended"


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
    renewals = Renewals(every=0.01, name="test-ended-leases", idle=0.05)
    started, release = threading.Event(), threading.Event()
    lost = threading.Event()

    def last() -> bool:
        started.set()
        release.wait(WAIT)
        return False

    with renewals.kept("item", last, lost=lost.set):
        assert started.wait(WAIT)
    release.set()
    assert _gone("test-ended-leases"), "the renewal never returned"  # it returned: idle after
    assert not lost.is_set()


def test_no_work_goes_on_without_a_thread_to_renew_its_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    start = threading.Thread.start

    def refused(thread: threading.Thread) -> None:
        if thread.name.endswith("-timer"):
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)
    ran: list[str] = []
    refusal = pytest.raises(RuntimeError, match="no thread to renew the lease of item")
    with refusal, renewals.kept("item", Counted(), lost=lambda: None):
        ran.append("the body")
    assert ran == []
    monkeypatch.setattr(threading.Thread, "start", start)
    renew = Counted()
    with renewals.kept("item", renew, lost=renew.lost.set):
        assert renew.reached.wait(WAIT)


def test_a_round_that_fails_is_logged_and_its_leases_renewed_at_the_next(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    renewals = Renewals(every=0.01, name="test-leases")
    start = threading.Thread.start
    failed: list[str] = []

    def fails_once(thread: threading.Thread) -> None:
        if thread.name.endswith("-worker") and not failed:
            failed.append(thread.name)
            raise MemoryError
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", fails_once)
    renew = Counted()
    with caplog.at_level(logging.ERROR), renewals.kept("item", renew, lost=renew.lost.set):
        assert renew.reached.wait(WAIT)
    assert failed and "could not hand over the leases of test-leases" in caplog.text


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_workers_that_die_are_replaced() -> None:
    """A renewal ends its thread with what no renewal may raise, more times than there are
    workers: the leases are renewed still."""
    renewals = Renewals(every=0.01, name="test-leases")
    deaths = RENEWING_THREADS + 2
    renew = Counted(times=deaths + 2)

    def dies() -> bool:
        renew()
        if renew.calls <= deaths:
            raise SystemExit
        return True

    with renewals.kept("item", dies, lost=renew.lost.set):
        assert renew.reached.wait(WAIT)


def test_a_lease_kept_while_every_other_is_being_renewed_is_renewed_on_time() -> None:
    """The only lease there was is being renewed (its renewal waits): the time keeper waits
    for nothing due. A lease kept then must still be renewed a round later."""
    renewals = Renewals(every=0.01, name="test-leases")
    waiting, release = threading.Event(), threading.Event()

    def stuck() -> bool:
        waiting.set()
        return release.wait(WAIT)

    later = Counted(times=2)
    try:
        with renewals.kept("stuck", stuck, lost=release.set):
            assert waiting.wait(WAIT)
            with renewals.kept("later", later, lost=later.lost.set):
                assert later.reached.wait(WAIT), "a lease kept meanwhile was never renewed"
    finally:
        release.set()


def test_a_lease_kept_after_an_idle_while_is_renewed_on_time() -> None:
    """The time keeper waits out its idle time with no lease at all: one kept then must not
    wait that long."""
    renewals = Renewals(every=0.01, name="test-leases", idle=WAIT * 10)
    first = Counted(times=1)
    with renewals.kept("first", first, lost=first.lost.set):
        assert first.reached.wait(WAIT)
    second = Counted(times=2)
    with renewals.kept("second", second, lost=second.lost.set):
        assert second.reached.wait(WAIT), "renewed only once the keeper's idle wait ended"
