"""The decision inbox: each item claimed by one worker at a time, a dead worker's item claimed
again once its lease ran out, and finished items never claimed again."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import pytest

from store.db import Database
from store.inbox import InboxRepository
from store.migrate import upgrade
from store.models import InboxKind, InboxStatus, utcnow

LEASE = dt.timedelta(minutes=1)
WORKERS = 6


def open_db(url: str) -> Iterator[Database]:
    db = Database(url, pool_size=WORKERS + 2)
    upgrade(db.engine)
    yield db
    db.dispose()


@pytest.fixture
def db(store_url: str) -> Iterator[Database]:
    yield from open_db(store_url)


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[Database]:
    yield from open_db(pg_url)


def add(db: Database, count: int) -> list[int]:
    with db.transaction() as s:
        return [InboxRepository(s).add(InboxKind.APPROVE, {"n": n}).id for n in range(count)]


def claim(db: Database, owner: str, *, now: dt.datetime | None = None) -> int | None:
    with db.transaction() as s:
        item = InboxRepository(s).claim_next(owner=owner, lease=LEASE, now=now)
        return item.id if item is not None else None


def test_concurrent_workers_each_hold_a_different_item(pg_db: Database) -> None:
    """Every worker holds its claim open until all have claimed: with SKIP LOCKED each takes
    the next free item instead of waiting for (or taking) another's."""
    ids = add(pg_db, WORKERS)
    all_claimed = threading.Barrier(WORKERS, timeout=20)
    taken: list[int | None] = []
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            with pg_db.transaction() as s:
                item = InboxRepository(s).claim_next(owner=f"w{n}", lease=LEASE)
                all_claimed.wait()  # inside the claiming transaction: the row is still locked
                taken.append(item.id if item else None)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert sorted(i for i in taken if i is not None) == ids


def test_concurrent_workers_claim_each_item_exactly_once(pg_db: Database) -> None:
    ids = add(pg_db, 60)
    start = threading.Barrier(WORKERS, timeout=20)
    taken: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        start.wait()
        while (item_id := claim(pg_db, f"w{n}")) is not None:
            with lock:
                taken.append(item_id)
            with pg_db.transaction() as s:
                assert InboxRepository(s).finish(item_id, owner=f"w{n}", status=InboxStatus.DONE)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(taken) == ids, "every item claimed once, none twice"
    with pg_db.transaction() as s:
        assert InboxRepository(s).unfinished() == 0


def test_items_are_claimed_oldest_first_and_a_held_lease_keeps_others_off(db: Database) -> None:
    first, second = add(db, 2)
    assert claim(db, "a") == first
    assert claim(db, "b") == second
    assert claim(db, "c") is None


def test_a_dead_workers_item_is_claimed_again_when_its_lease_ran_out(db: Database) -> None:
    [item_id] = add(db, 1)
    now = utcnow()
    assert claim(db, "dead", now=now) == item_id
    assert claim(db, "alive", now=now + LEASE / 2) is None, "the lease still holds"
    assert claim(db, "alive", now=now + LEASE * 2) == item_id
    with db.transaction() as s:
        repo = InboxRepository(s)
        item = repo.get(item_id)
        assert item is not None
        assert (item.claimed_by, item.attempts) == ("alive", 2)
        assert not repo.finish(item_id, owner="dead", status=InboxStatus.DONE), "lost its lease"
        assert repo.finish(item_id, owner="alive", status=InboxStatus.DONE)
    assert claim(db, "later", now=now + LEASE * 10) is None, "a finished item stays finished"


def test_a_renewed_lease_is_not_taken_over(db: Database) -> None:
    [item_id] = add(db, 1)
    now = utcnow()
    assert claim(db, "slow", now=now) == item_id
    with db.transaction() as s:
        assert InboxRepository(s).renew(item_id, owner="slow", until=now + LEASE * 3)
        assert not InboxRepository(s).renew(item_id, owner="other", until=now + LEASE * 9)
    assert claim(db, "other", now=now + LEASE * 2) is None


def test_items_stored_together_get_their_ids_in_the_order_given(db: Database) -> None:
    with db.transaction() as s:
        ids = InboxRepository(s).add_many([(InboxKind.APPROVE, {"n": n}) for n in range(40)])
    assert ids == sorted(ids) and len(set(ids)) == 40
    with db.transaction() as s:
        stored = [InboxRepository(s).get(i) for i in ids]
        assert [item.payload["n"] for item in stored if item is not None] == list(range(40))
        assert {item.status for item in stored if item is not None} == {InboxStatus.QUEUED}
