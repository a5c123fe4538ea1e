"""The group commit in front of the inbox: under a burst many clicks share one transaction,
each listener learns whether its own item is stored, and an item given up on is never stored."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from bot.inbox_writer import InboxWriter
from store.db import Database
from store.inbox import InboxRepository
from store.inbox_models import InboxItem, InboxKind
from store.migrate import upgrade
from tests.wire import watching


@pytest.fixture
def db(sqlite_url: str) -> Iterator[Database]:
    database = Database(sqlite_url)
    upgrade(database.engine)
    yield database
    database.dispose()


class Stalled:
    """Holds the writer inside its first transaction until released; records batch sizes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.sizes: list[int] = []
        add_many = InboxRepository.add_many

        def held(repo: InboxRepository, items: list, **kwargs: str) -> list[int]:  # type: ignore[type-arg]
            self.sizes.append(len(items))
            self.entered.set()
            self.release.wait(timeout=30)
            return add_many(repo, items, **kwargs)

        monkeypatch.setattr(InboxRepository, "add_many", held)


def stored(db: Database) -> int:
    with db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(InboxItem)) or 0)


def test_a_burst_shares_transactions_and_every_item_is_stored_once(db, monkeypatch):
    stall = Stalled(monkeypatch)
    writer = InboxWriter(db)
    with ThreadPoolExecutor(21) as pool:
        first = pool.submit(writer.write, InboxKind.DECIDE, {"n": 0})
        assert stall.entered.wait(timeout=30)
        rest = [pool.submit(writer.write, InboxKind.DECIDE, {"n": i}) for i in range(1, 21)]
        while writer.waiting() < 20:  # all twenty queued behind the open transaction
            threading.Event().wait(0.01)
        stall.release.set()
        assert first.result() and all(f.result() for f in rest)
    writer.close()
    assert stall.sizes == [1, 20], "the twenty queued clicks went in one transaction"
    assert stored(db) == 21


def test_an_item_given_up_on_before_it_was_taken_is_never_stored(db, monkeypatch):
    stall = Stalled(monkeypatch)
    writer = InboxWriter(db, wait=0.2)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(writer.write, InboxKind.DECIDE, {"n": 0})
        assert stall.entered.wait(timeout=30)
        assert writer.write(InboxKind.DECIDE, {"n": 1}) is False, "answered busy"
        stall.release.set()
        assert first.result() is True
    writer.close()
    assert stored(db) == 1, "the withdrawn click was not stored behind the user's back"


def test_a_failed_transaction_fails_each_of_its_items(db, monkeypatch):
    def broken(repo: InboxRepository, items: list, **kwargs: str) -> list[int]:  # type: ignore[type-arg]
        raise RuntimeError("the database is unreachable")

    monkeypatch.setattr(InboxRepository, "add_many", broken)
    writer = InboxWriter(db)
    assert writer.write(InboxKind.DECIDE, {"n": 0}) is False
    writer.close()
    assert stored(db) == 0


def test_an_item_the_store_refuses_fails_alone_not_the_clicks_stored_with_it(db, monkeypatch):
    """Under a burst clicks share a statement: one the store refuses (whatever it holds) is
    answered busy on its own; the others are stored one at a time and acked."""
    add_many = InboxRepository.add_many

    def refusing(repo: InboxRepository, items: list, **kwargs: str) -> list[int]:  # type: ignore[type-arg]
        if any(payload.get("poison") for _kind, payload in items):
            raise ValueError("refused by the store")
        return add_many(repo, items, **kwargs)

    monkeypatch.setattr(InboxRepository, "add_many", refusing)
    stall = Stalled(monkeypatch)  # around the refusal: it sees every batch tried
    writer = InboxWriter(db)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(writer.write, InboxKind.DECIDE, {"n": 0})
        assert stall.entered.wait(timeout=30)
        rest = [
            pool.submit(writer.write, InboxKind.DECIDE, payload)
            for payload in ({"n": 1}, {"poison": True}, {"n": 2})
        ]
        while writer.waiting() < 3:  # all three queued behind the open transaction
            threading.Event().wait(0.01)
        stall.release.set()
        answers = [f.result() for f in (first, *rest)]
    writer.close()
    assert stall.sizes[:2] == [1, 3], "the three queued clicks were tried together first"
    assert answers == [True, True, False, True]
    assert stored(db) == 3


def test_a_database_that_is_down_is_not_asked_once_per_click(db, monkeypatch, caplog):
    """Every click of the batch is answered at once (none waits out the commit's limit), and
    the database is asked once for all of them."""
    from sqlalchemy.exc import OperationalError

    import bot.inbox_writer

    monkeypatch.setattr(bot.inbox_writer, "COMMIT_SECONDS", 1.0)

    def down(repo: InboxRepository, items: list, **kwargs: str) -> list[int]:  # type: ignore[type-arg]
        raise OperationalError("INSERT", {}, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(InboxRepository, "add_many", down)
    stall = Stalled(monkeypatch)
    writer = InboxWriter(db)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(writer.write, InboxKind.DECIDE, {"n": 0})
        assert stall.entered.wait(timeout=30)
        rest = [pool.submit(writer.write, InboxKind.DECIDE, {"n": n}) for n in (1, 2, 3)]
        while writer.waiting() < 3:
            threading.Event().wait(0.01)
        stall.release.set()
        answers = [f.result() for f in (first, *rest)]
    writer.close()
    assert answers == [False] * 4 and stall.sizes == [1, 3]
    assert "outlasted" not in caplog.text, "a click of the batch was left without its answer"


def test_a_payload_that_is_not_json_is_answered_busy_not_raised(db):
    writer = InboxWriter(db)
    assert writer.write(InboxKind.DECIDE, {"at": object()}) is False
    writer.close()
    assert stored(db) == 0


def test_on_postgresql_a_click_is_stored_in_one_round_trip(migrated_pg_url):
    """The write on every click's path before its ack: one statement, its own transaction,
    with no BEGIN and COMMIT round trips around it."""
    database = Database(migrated_pg_url)
    upgrade(database.engine)
    writer = InboxWriter(database)
    try:
        with watching(database) as wire:
            assert writer.write(InboxKind.DECIDE, {"n": 1})
        assert (wire.round_trips, wire.state_after("INSERT INTO inbox_items")) == (1, "I")
        assert stored(database) == 1
    finally:
        writer.close()
        database.dispose()
