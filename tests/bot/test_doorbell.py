"""Waking inbox workers: one ring wakes one worker, a ring nobody waited for is kept (up to a
limit), and a click costs a couple of claiming transactions however many workers wait."""

from __future__ import annotations

import threading

import psycopg

from bot.doorbell import Doorbell
from bot.sandbox import people
from store.inbox import INBOX_CHANNEL, InboxRepository
from tests.bot.flows import SEND, button, result_message, start_run


def test_a_ring_nobody_waited_for_is_kept_up_to_the_limit() -> None:
    bell = Doorbell(keep=2)
    for _ in range(5):
        bell.ring()
    assert bell.wait(timeout=0) and bell.wait(timeout=0)
    assert not bell.wait(timeout=0)


def test_one_ring_wakes_one_of_several_waiters_and_close_wakes_them_all() -> None:
    bell = Doorbell()
    woken: list[bool] = []
    returned = threading.Semaphore(0)
    waiting = threading.Barrier(4)

    def waiter() -> None:
        waiting.wait()
        woken.append(bell.wait(timeout=30))
        returned.release()

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for thread in threads:
        thread.start()
    waiting.wait()
    bell.ring()
    assert returned.acquire(timeout=10)
    assert not returned.acquire(timeout=0.3), "one ring woke a second waiter"
    assert woken == [True]
    bell.close()
    for thread in threads:
        thread.join(timeout=10)
    assert woken == [True, True, True]


def test_a_click_costs_a_few_claims_however_many_workers_wait(
    serve_bot, migrated_pg_url, monkeypatch
):
    h = serve_bot(migrated_pg_url, worker_threads=8)
    claims: list[int] = []
    claim = InboxRepository.claim_next

    def counted(self, **kwargs):  # type: ignore[no-untyped-def]
        claims.append(1)
        return claim(self, **kwargs)

    root, card = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    monkeypatch.setattr(InboxRepository, "claim_next", counted)
    h.bot.services.handoff.close()  # stored queued, as if no worker were idle (test_handoff)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert h.bot.listeners.wait_idle(timeout=60)
    assert 1 <= len(claims) <= 4, f"{len(claims)} claiming transactions for one click"


def test_a_click_rings_once_in_the_process_that_stored_it(serve_bot, migrated_pg_url, monkeypatch):
    """Its own NOTIFY rings no second worker there; another process's NOTIFY does ring."""
    rings: list[int] = []
    heard: list[str] = []
    done = threading.Condition()
    ring, notifies = Doorbell.ring, psycopg.Connection.notifies

    def counted(self: Doorbell) -> None:
        rings.append(1)
        ring(self)

    def listened(self, **kwargs):  # type: ignore[no-untyped-def]
        for note in notifies(self, **kwargs):
            yield note
            with done:  # the listener has acted on it
                heard.append(note.payload)
                done.notify_all()

    # Watched from the start: a NOTIFY is never read by a look begun before the patch.
    monkeypatch.setattr(psycopg.Connection, "notifies", listened)
    h = serve_bot(migrated_pg_url, worker_threads=8)
    root, card = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    monkeypatch.setattr(Doorbell, "ring", counted)
    h.bot.services.handoff.close()  # stored queued, so it is announced by a NOTIFY
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    with psycopg.connect(migrated_pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (INBOX_CHANNEL, "elsewhere 0"))
    with done:  # notifications arrive in order: the click's own was acted on before it
        assert done.wait_for(lambda: "elsewhere 0" in heard, timeout=60)
    assert len(rings) == 2, "the click's own NOTIFY rang a second time"
