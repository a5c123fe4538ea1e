"""A stored click handed straight to an idle inbox worker of the same process: stored claimed
for it (one insert), worked once without a claiming transaction, and as durable as any claimed
item: if its worker never finishes it, its lease runs out and another worker claims it.
Nothing is handed over without an idle worker, and nothing is kept only in memory when the
pool stops. Real PostgreSQL."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import event, func, select, update

import bot.inbox_runner
from bot.handoff import Handoff
from bot.inbox import InboxWorkers
from bot.inbox_writer import InboxWriter
from bot.sandbox import people
from store.db import Database
from store.inbox import Held, InboxRepository
from store.inbox_models import InboxItem, InboxKind, InboxStatus
from store.migrate import upgrade
from store.models import utcnow
from tests.bot.flows import SEND, button, result_message, start_run
from tests.bot.test_inbox import another_worker_redoes_it, lease_runs_out, recorded

LEASE = dt.timedelta(minutes=1)


@pytest.fixture
def db(migrated_pg_url: str) -> Iterator[Database]:
    database = Database(migrated_pg_url)
    upgrade(database.engine)
    yield database
    database.dispose()


def rows(db: Database) -> list[tuple[str, str | None, int]]:
    with db.transaction() as s:
        found = s.execute(
            select(InboxItem.status, InboxItem.claimed_by, InboxItem.attempts).order_by(
                InboxItem.id
            )
        )
        return [(status, owner, attempts) for status, owner, attempts in found]


def test_an_idle_worker_is_handed_the_item_stored_claimed_for_it_in_one_statement(db):
    handoff = Handoff()
    handoff.open(owner="here", lease=LEASE)
    writer = InboxWriter(db, handoff=handoff)
    sent: list[str] = []
    listener = lambda _c, _cur, statement, *_a: sent.append(statement)  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", listener)
    with handoff.idle():
        assert writer.write(InboxKind.APPROVE, {"n": 1})
        assert writer.write(InboxKind.APPROVE, {"n": 2}), "stored: its one idle worker is taken"
    event.remove(db.engine, "before_cursor_execute", listener)
    writer.close()
    assert len(sent) == 2, "one statement per stored click, NOTIFY included"
    assert rows(db) == [(InboxStatus.CLAIMED, "here", 1), (InboxStatus.QUEUED, None, 0)]
    taken = handoff.take()
    handed = taken.item if taken is not None else None
    assert handed is not None and (handed.kind, handed.payload, handed.attempts) == (
        InboxKind.APPROVE,
        {"n": 1},
        1,
    )
    assert handoff.take() is None


def test_a_worker_handed_a_click_works_on_what_was_stored_not_what_came(db):
    """Text the store cannot hold as given is stored cleaned: the worker handed the click in
    memory gets that same cleaned copy, as one that claims it later would."""
    handoff = Handoff()
    handoff.open(owner="here", lease=LEASE)
    writer = InboxWriter(db, handoff=handoff)
    with handoff.idle():
        assert writer.write(InboxKind.DECIDE, {"reason": "keep\x00it", "note": "fine \U0001f600"})
    writer.close()
    taken = handoff.take()
    assert taken is not None
    with db.transaction() as s:
        (stored,) = s.scalars(select(InboxItem.payload)).all()
    assert taken.item.payload == stored == {"reason": "keep\ufffdit", "note": "fine \U0001f600"}


def test_nothing_is_handed_over_without_an_idle_worker_or_an_open_pool(db):
    handoff = Handoff()
    writer = InboxWriter(db, handoff=handoff)
    with handoff.idle():
        assert writer.write(InboxKind.APPROVE, {"n": 1}), "no pool in this process"
    handoff.open(owner="here", lease=LEASE)
    assert writer.write(InboxKind.APPROVE, {"n": 2}), "every worker busy"
    writer.close()
    assert rows(db) == [(InboxStatus.QUEUED, None, 0)] * 2
    assert handoff.take() is None


def test_items_for_a_pool_that_stopped_while_they_were_stored_are_queued_again(db, monkeypatch):
    handoff = Handoff()
    handoff.open(owner="here", lease=LEASE)
    add_many = InboxRepository.add_many

    def stopping_meanwhile(repo: InboxRepository, items: list, **kwargs: object) -> list[int]:  # type: ignore[type-arg]
        handoff.close()
        return add_many(repo, items, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(InboxRepository, "add_many", stopping_meanwhile)
    writer = InboxWriter(db, handoff=handoff)
    with handoff.idle():
        assert writer.write(InboxKind.APPROVE, {"n": 1})
    writer.close()
    assert handoff.take() is None, "nothing kept in memory for a closed pool"
    assert rows(db) == [(InboxStatus.QUEUED, None, 0)], "any worker may claim it at once"


def test_a_click_handed_to_an_idle_worker_is_worked_once_without_a_claim(
    serve_bot, migrated_pg_url, monkeypatch
):
    h = serve_bot(migrated_pg_url, worker_threads=2)
    claimed: list[int] = []
    claim = InboxRepository.claim_next

    def counted(self, **kwargs):  # type: ignore[no-untyped-def]
        item = claim(self, **kwargs)
        if item is not None:
            claimed.append(item.id)
        return item

    monkeypatch.setattr(InboxRepository, "claim_next", counted)
    root, card = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    assert h.bot.services.handoff.wait_idle(2, timeout=60)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    result_message(h, root)
    assert h.bot.inbox.wait_idle(timeout=60)
    assert claimed == [], "no claiming transaction for the handed-over click"
    assert rows(h.bot.db) == [(InboxStatus.DONE, h.bot.inbox.owner, 1)]
    assert recorded(h) == (1, [])
    assert [e["tool"] for e in h.workspace.effects()] == ["send_external_message"]


def test_a_handed_over_click_whose_worker_never_works_it_is_claimed_again(
    serve_bot, migrated_pg_url
):
    """The process dies with the item in memory: it is stored claimed, so once its lease runs
    out another worker claims it (a second attempt) and decides it."""
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    handoff = h.bot.services.handoff
    handoff.open(owner="a-process-about-to-die", lease=LEASE)
    root, card = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    with handoff.idle():
        h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
        assert h.bot.listeners.wait_idle(timeout=60)
    assert rows(h.bot.db) == [(InboxStatus.CLAIMED, "a-process-about-to-die", 1)]
    assert not h.bot.inbox.run_once(), "its lease holds"
    lease_runs_out(h)
    another_worker_redoes_it(h)
    result_message(h, root)
    assert recorded(h) == (1, [])


def test_items_handed_over_before_the_pool_stops_are_worked_before_it_exits(
    serve_bot, migrated_pg_url, monkeypatch
):
    h = serve_bot(migrated_pg_url, inbox_workers=False, worker_threads=1)
    inbox, handoff = h.bot.inbox, h.bot.services.handoff
    first_root, first = start_run(h, SEND)
    second_root, second = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    busy, release = threading.Event(), threading.Event()
    process = bot.inbox_runner.process

    def held_first(*args: object, **kwargs: object) -> None:
        if not busy.is_set():
            busy.set()
            assert release.wait(timeout=60)
        process(*args, **kwargs)

    monkeypatch.setattr("bot.inbox_runner.process", held_first)
    inbox.start()
    h.driver.click(user=people.RELEASE_MANAGER, message=first, button=button(first, "Approve"))
    assert busy.wait(timeout=60), "the only worker is busy with the first click"
    with handoff.idle():  # a worker about to wait, as the second click is stored
        h.driver.click(
            user=people.RELEASE_MANAGER, message=second, button=button(second, "Approve")
        )
        assert h.bot.listeners.wait_idle(timeout=60)
    assert rows(h.bot.db)[1] == (InboxStatus.CLAIMED, inbox.owner, 1), "handed over"
    stopping = threading.Thread(target=inbox.stop)
    stopping.start()
    assert inbox._stop.wait(timeout=60)
    release.set()
    stopping.join(timeout=120)
    assert rows(h.bot.db) == [(InboxStatus.DONE, inbox.owner, 1)] * 2
    result_message(h, first_root)
    result_message(h, second_root)


def test_a_handed_over_click_that_fails_is_given_back_to_be_tried_again(
    serve_bot, migrated_pg_url, monkeypatch
):
    h = serve_bot(migrated_pg_url, worker_threads=1)
    given_back = threading.Event()
    retry_later = InboxRepository.retry_later

    def failing(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the agent is unreachable")

    def noted(self: InboxRepository, *args: object, **kwargs: object) -> bool:
        kept = retry_later(self, *args, **kwargs)  # type: ignore[arg-type]
        # Told once the giving back is committed, not when its statement is sent.
        event.listen(self.session, "after_commit", lambda _s: given_back.set(), once=True)
        return kept

    monkeypatch.setattr("bot.inbox_runner.process", failing)
    monkeypatch.setattr(InboxRepository, "retry_later", noted)
    root, card = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    assert h.bot.services.handoff.wait_idle(1, timeout=60)
    h.driver.click(user=people.RELEASE_MANAGER, message=card, button=button(card, "Approve"))
    assert given_back.wait(timeout=60)
    with h.bot.db.transaction() as s:
        item = s.scalars(select(InboxItem)).one()
        assert (item.status, item.claimed_by, item.attempts) == (InboxStatus.CLAIMED, None, 1)
        assert item.last_error == "RuntimeError: the agent is unreachable"
    monkeypatch.undo()
    lease_runs_out(h)
    h.bot.services.doorbell.ring()
    result_message(h, root)
    assert h.bot.inbox.wait_idle(timeout=60)
    assert rows(h.bot.db) == [(InboxStatus.DONE, h.bot.inbox.owner, 2)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_item_taken_past_its_fresh_window_is_taken_late(db):
    """Nothing renews the lease an item was stored with until a worker takes it: one taken
    after its window (counted from before that lease was computed) is marked late."""
    clock = Clock()
    handoff = Handoff(clock=clock)
    handoff.open(owner="this-process", lease=dt.timedelta(minutes=1))
    writer = InboxWriter(db, handoff=handoff)
    try:
        with handoff.idle(), handoff.idle():  # two workers waiting for work
            assert writer.write(InboxKind.APPROVE, {"n": 1})
            assert writer.write(InboxKind.APPROVE, {"n": 2})
    finally:
        writer.close()
    first = handoff.take()
    assert first is not None and (first.item.payload, first.late) == ({"n": 1}, False)
    clock.now += 1.0
    second = handoff.take()
    assert second is not None and (second.item.payload, second.late) == ({"n": 2}, True)
    assert rows(db) == [(InboxStatus.CLAIMED, "this-process", 1)] * 2


def test_a_late_item_is_kept_only_while_it_is_still_its_first_claim(db):
    with db.transaction() as s:
        repo = InboxRepository(s)
        kept, taken_again, lapsed = repo.add_many(
            [(InboxKind.APPROVE, {"n": n}) for n in range(3)],
            held=Held("me", utcnow() + dt.timedelta(minutes=1), 3),
        )
    with db.transaction() as s:  # one lapsed and claimed again by a worker of the same owner
        s.execute(
            update(InboxItem)
            .where(InboxItem.id.in_([taken_again, lapsed]))
            .values(lease_until=utcnow() - dt.timedelta(seconds=1))
        )
        again = InboxRepository(s).claim_next(owner="me", lease=dt.timedelta(minutes=1))
        assert again is not None and (again.id, again.attempts) == (taken_again, 2)
    lease = dt.timedelta(minutes=5)
    with db.transaction() as s:
        repo = InboxRepository(s)
        assert repo.keep_handed(kept, owner="me", lease=lease)
        assert not repo.keep_handed(taken_again, owner="me", lease=lease)
        assert not repo.keep_handed(lapsed, owner="me", lease=lease)
        assert not repo.keep_handed(kept, owner="someone-else", lease=lease)
        until = s.scalar(select(InboxItem.lease_until).where(InboxItem.id == kept))
    assert until is not None and until > utcnow() + dt.timedelta(minutes=4)


def test_a_click_handed_over_while_its_worker_stays_busy_is_worked_once(
    serve_bot, migrated_pg_url, monkeypatch
):
    """The worker counted idle took other work and stayed busy past the lease: the item is
    claimed again elsewhere, and the busy worker, taking it late, leaves it alone."""
    h = serve_bot(migrated_pg_url, inbox_workers=False)
    handoff = h.bot.services.handoff
    clock = Clock()
    handoff.clock = clock
    _first_root, first = start_run(h, SEND)
    _second_root, second = start_run(h, SEND)
    assert h.bot.listeners.wait_idle(timeout=60)
    busy, release = threading.Event(), threading.Event()
    worked: list[str] = []
    process = bot.inbox_runner.process

    def noted(services, kind, work, *, key):  # type: ignore[no-untyped-def]
        worked.append(key)
        if not busy.is_set():
            busy.set()
            assert release.wait(timeout=60)
        process(services, kind, work, key=key)

    monkeypatch.setattr("bot.inbox_runner.process", noted)
    pool = InboxWorkers(h.bot.services, threads=1, lease=dt.timedelta(minutes=1))
    pool.start()
    try:
        h.driver.click(user=people.RELEASE_MANAGER, message=first, button=button(first, "Approve"))
        assert busy.wait(timeout=60), "the only worker is busy with the first click"
        with handoff.idle():  # counted idle as the second click is stored
            h.driver.click(
                user=people.RELEASE_MANAGER, message=second, button=button(second, "Approve")
            )
            assert h.bot.listeners.wait_idle(timeout=60)
        clock.now += 60.0  # the busy worker is still busy; the handed item's lease runs out
        with h.bot.db.transaction() as s:
            handed = s.scalar(select(func.max(InboxItem.id)))
            s.execute(
                update(InboxItem)
                .where(InboxItem.id == handed)
                .values(lease_until=utcnow() - dt.timedelta(seconds=1))
            )
        other = InboxWorkers(h.bot.services, threads=1, lease=dt.timedelta(minutes=1))
        assert other.run_once(), "the lapsed handed-over click is claimed again"
        release.set()
        assert pool.wait_idle(timeout=60)
    finally:
        release.set()
        pool.stop(timeout=30)
    assert sorted(worked) == sorted(set(worked)) and len(worked) == 2, worked
