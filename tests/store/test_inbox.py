"""The decision inbox: each item claimed by one worker at a time, a dead worker's item claimed
again once its lease ran out, and finished items never claimed again."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import event

from store.db import Database
from store.inbox import INBOX_CHANNEL, Held, InboxRepository, notified_by
from store.inbox_models import InboxKind, InboxStatus
from store.migrate import upgrade
from store.models import utcnow

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


class Statements:
    """Counts the statements sent to the database while it is active."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sent: list[str] = []

    def __enter__(self) -> Statements:
        event.listen(self.db.engine, "before_cursor_execute", self._count)
        return self

    def __exit__(self, *_exc: object) -> None:
        event.remove(self.db.engine, "before_cursor_execute", self._count)

    def _count(self, _conn, _cursor, statement: str, *_args: object) -> None:  # type: ignore[no-untyped-def]
        self.sent.append(statement)


def test_items_are_stored_and_announced_in_one_statement(pg_db: Database, pg_url: str) -> None:
    """On the path of every click's ack: the insert and its NOTIFY are one round trip, and
    the NOTIFY still names the origin and the last item stored."""
    with psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {INBOX_CHANNEL}")
        with pg_db.transaction() as s, Statements(pg_db) as statements:
            repo = InboxRepository(s)
            ids = repo.add_many([(InboxKind.APPROVE, {"n": n}) for n in range(5)], origin="me")
        [note] = list(listener.notifies(timeout=5, stop_after=1))
    assert len(statements.sent) == 1, statements.sent
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert note.payload == f"me {ids[-1]}" and notified_by(note.payload) == "me"
    with pg_db.transaction() as s:
        got = [InboxRepository(s).get(i) for i in ids]
        assert [item.payload["n"] for item in got if item is not None] == list(range(5))


@pytest.mark.parametrize("size", [1, 3, 64])
def test_storing_items_reuses_the_compiled_statement_whatever_the_batch(
    db: Database, size: int
) -> None:
    """On the path of every click's ack: compiling a statement costs more than the write it
    sends, so a batch of any size (held or not) is sent with a statement compiled before."""
    now = utcnow()
    held = Held(owner="here", until=now + LEASE, count=1)
    for warm in ([(InboxKind.APPROVE, {"n": 0})], [(InboxKind.CANCEL, {})] * 2):
        with db.single() as s:
            InboxRepository(s).add_many(warm, origin="me", held=held, now=now)
    hits: list[object] = []

    def seen(_conn, _cursor, statement, _params, context, _many) -> None:  # type: ignore[no-untyped-def]
        if "inbox_items" in statement:
            hits.append((context.cache_hit, statement))

    event.listen(db.engine, "after_cursor_execute", seen)
    try:
        for notify in (True, False):
            count = size if not notify else 0
            with db.single() as s:
                ids = InboxRepository(s).add_many(
                    [(InboxKind.DECIDE, {"n": n}) for n in range(size)],
                    origin="me",
                    held=Held(owner="here", until=now + LEASE, count=count),
                    now=now,
                )
            assert len(ids) == size
    finally:
        event.remove(db.engine, "after_cursor_execute", seen)
    cached = db.engine.dialect.CACHE_HIT
    assert hits and all(hit == cached for hit, _sql in hits), hits


def test_a_claim_is_one_statement_for_a_queued_and_for_a_lapsed_item(pg_db: Database) -> None:
    first, second = add(pg_db, 2)
    now = utcnow()
    with Statements(pg_db) as statements:
        assert claim(pg_db, "a", now=now) == first
    assert len([s for s in statements.sent if "inbox_items" in s]) == 1, statements.sent
    assert claim(pg_db, "b", now=now) == second
    with Statements(pg_db) as statements:
        assert claim(pg_db, "c", now=now + LEASE * 2) == first, "the oldest lapsed first"
        assert claim(pg_db, "d", now=now + LEASE / 2) is None
    assert len([s for s in statements.sent if "inbox_items" in s]) == 2, statements.sent
    with pg_db.transaction() as s:
        item = InboxRepository(s).get(first)
        assert item is not None and (item.claimed_by, item.attempts) == ("c", 2)


def test_items_can_be_stored_already_claimed_and_are_claimed_again_once_lapsed(
    db: Database,
) -> None:
    """The first ``count`` of a batch go to a worker of this process at once: stored claimed,
    with a lease; if that worker never finishes them, they lapse like any claimed item."""
    now = utcnow()
    held = Held(owner="here", until=now + LEASE, count=2)
    with db.transaction() as s:
        ids = InboxRepository(s).add_many(
            [(InboxKind.APPROVE, {"n": n}) for n in range(3)], held=held, now=now
        )
    with db.transaction() as s:
        got = [InboxRepository(s).get(i) for i in ids]
        states = [(i.status, i.claimed_by, i.attempts) for i in got if i is not None]
    assert states == [
        (InboxStatus.CLAIMED, "here", 1),
        (InboxStatus.CLAIMED, "here", 1),
        (InboxStatus.QUEUED, None, 0),
    ]
    assert claim(db, "other", now=now) == ids[2]
    assert claim(db, "other", now=now + LEASE / 2) is None, "the hand-off's lease holds"
    assert claim(db, "other", now=now + LEASE * 2) == ids[0]
    with db.transaction() as s:
        repo = InboxRepository(s)
        assert not repo.finish(ids[0], owner="here", status=InboxStatus.DONE), "lost its lease"
        item = repo.get(ids[0])
        assert item is not None and (item.claimed_by, item.attempts) == ("other", 2)


def test_items_handed_back_are_queued_as_if_never_claimed(db: Database) -> None:
    now = utcnow()
    with db.transaction() as s:
        ids = InboxRepository(s).add_many(
            [(InboxKind.APPROVE, {})], held=Held(owner="here", until=now + LEASE, count=1)
        )
    with db.transaction() as s:
        assert InboxRepository(s).release(ids, owner="here") == 1
        assert InboxRepository(s).release(ids, owner="here") == 0, "only what it holds"
    assert claim(db, "other", now=now) == ids[0]
    with db.transaction() as s:
        item = InboxRepository(s).get(ids[0])
        assert item is not None and item.attempts == 1


def test_a_payload_with_text_the_store_cannot_hold_is_stored_cleaned_with_its_batch(
    db: Database,
) -> None:
    """Anything a signed request carries is stored: a NUL or a lone surrogate (which
    PostgreSQL's JSON functions refuse) becomes U+FFFD, and the items stored with it in one
    statement are stored too."""
    hostile = {
        "view": {"reason": "keep\x00it", "\x00key": ["a\x00", "\ud800b", "ok \U0001f600"]},
        "pair": ("x\x00",),  # a tuple goes as a list
    }
    with db.single() as s:
        first, second = InboxRepository(s).add_many(
            [(InboxKind.DECIDE, hostile), (InboxKind.APPROVE, {"n": 1})]
        )
    with db.transaction() as s:
        repo = InboxRepository(s)
        got_first, got_second = repo.get(first), repo.get(second)
        assert got_first is not None and got_second is not None
        kept = ["a\ufffd", "\ufffdb", "ok \U0001f600"]  # a lone surrogate too; an emoji as it is
        assert got_first.payload == {
            "view": {"reason": "keep\ufffdit", "\ufffdkey": kept},
            "pair": ["x\ufffd"],
        }
        assert got_second.payload == {"n": 1}
