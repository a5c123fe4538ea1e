"""The announcer with a notifier that fails on demand: nothing it was asked to say is lost,
and nothing is said twice when Slack took it but the answer was lost."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from sqlalchemy import event

from agent_runtime.announcer import Announcer
from agent_runtime.card_draws import decisions_on
from agent_runtime.notifier import MessageRef, NullNotifier
from agent_runtime.views import ApprovalView, RunView, approval_view, run_view
from store.claim_repository import ClaimRepository
from store.db import Database
from store.locks import ThreadLocks
from store.maintenance import MaintenanceQueries
from store.models import utcnow
from store.repositories import ApprovalRepository, DecisionRepository, RunRepository
from store.statuses import RequestStatus, RunStatus
from tests.agent_runtime.rows import seed_request, sqlite_store


@dataclass
class FlakyNotifier(NullNotifier):
    failing: bool = True
    posted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    drawn: list[ApprovalView] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    in_chat: MessageRef | None = None
    on_update: Callable[[], None] | None = None
    on_post: Callable[[], None] | None = None
    """Called while a card's post is being answered."""
    before_update: Callable[[ApprovalView], None] | None = None
    """Called as an update leaves, before it reaches Slack (an update in flight)."""
    after_update: Callable[[ApprovalView], None] | None = None
    """Called once an update reached Slack, before its answer comes back."""

    def approval_requested(self, approval: ApprovalView) -> MessageRef | None:
        if self.failing:
            raise TimeoutError("slack did not answer")
        self.posted.append(approval.id)
        if self.on_post is not None:
            self.on_post()
        return MessageRef("C1", f"{len(self.posted)}.5")

    def find_card(self, approval: ApprovalView) -> MessageRef | None:
        return self.in_chat

    def approval_updated(self, approval: ApprovalView) -> None:
        if self.before_update is not None:
            self.before_update(approval)
        if self.failing:
            raise TimeoutError("slack did not answer")
        self.updated.append(approval.status)
        self.drawn.append(approval)
        if self.after_update is not None:
            self.after_update(approval)
        if self.on_update is not None:
            self.on_update()

    def run_finished(self, run: RunView) -> None:
        if self.failing:
            raise TimeoutError("slack did not answer")
        self.results.append(run.id)


def announcer_on(tmp_path):  # type: ignore[no-untyped-def]
    db = sqlite_store(tmp_path)
    notifier = FlakyNotifier()
    return db, notifier, Announcer(db=db, notifier=notifier, locks=ThreadLocks(db))


def card_of(db, request_id):  # type: ignore[no-untyped-def]
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        return request.card_ts, request.card_status


def test_a_failed_post_is_posted_again_later_once(tmp_path):
    db, notifier, announcer = announcer_on(tmp_path)
    seeded = seed_request(db)
    announcer.post_card(seeded.request_id)
    assert card_of(db, seeded.request_id) == (None, None), "no card, no reference"
    notifier.failing = False
    later = utcnow() + dt.timedelta(seconds=1)
    assert announcer.retry_card_posts(created_before=later) == 1
    assert card_of(db, seeded.request_id) == ("1.5", RequestStatus.PENDING)
    assert announcer.retry_card_posts(created_before=later) == 0, "posted once"
    assert notifier.posted == [seeded.request_id]


def test_a_card_slack_took_is_adopted_not_posted_twice(tmp_path):
    db, notifier, announcer = announcer_on(tmp_path)
    seeded = seed_request(db)
    notifier.in_chat = MessageRef("C1", "9.9")
    announcer.retry_card_posts(created_before=utcnow() + dt.timedelta(seconds=1))
    assert card_of(db, seeded.request_id) == ("9.9", RequestStatus.PENDING)
    assert notifier.posted == []


def test_a_card_whose_request_moved_on_while_it_was_posted_is_left_to_the_repair(tmp_path):
    """A decision (from a modal) is recorded while the card's post is being answered: the
    card stored then shows the request as it was. Until it is drawn again, a crash must leave
    it for the repair to find."""
    db, notifier, announcer = announcer_on(tmp_path)
    seeded = seed_request(db)
    notifier.failing = False
    listed_at_redraw: list[list[str]] = []

    def decide_meanwhile() -> None:
        _decide(db, seeded)

    def crash_here(view: ApprovalView) -> None:
        with db.transaction() as s:
            listed_at_redraw.append([r.id for r in MaintenanceQueries(s).cards_out_of_date()])

    notifier.on_post, notifier.before_update = decide_meanwhile, crash_here
    announcer.post_card(seeded.request_id)
    _redrawn(seeded.request_id)  # on a thread of its own: the caller holds the run's lock
    assert listed_at_redraw == [[seeded.request_id]], "a crash before the redraw: unrepaired"
    assert [len(view.actions[0].decisions) for view in notifier.drawn] == [1]
    assert card_of(db, seeded.request_id)[1] == RequestStatus.PENDING


def test_a_card_whose_request_is_being_resumed_once_posted_is_left_to_the_resume(tmp_path):
    """A click on the card while its post was being answered completed the request, whose
    resume (in another process, maybe) draws the card's end from the row. Drawn again here,
    the card could show "resuming" after that end while the store says it shows the end:
    nothing is drawn, and the reference is stored for the resume's end to find."""
    db, notifier, announcer = announcer_on(tmp_path)
    seeded = seed_request(db)
    notifier.failing = False

    def completed_meanwhile() -> None:
        with db.transaction() as s:
            claims = ClaimRepository(s)
            assert claims.claim(seeded.request_id, owner="elsewhere", lease=dt.timedelta(hours=1))

    notifier.on_post = completed_meanwhile
    announcer.post_card(seeded.request_id)
    _redrawn(seeded.request_id)
    assert notifier.drawn == [], "drawn while another process may be drawing its end"
    assert card_of(db, seeded.request_id) == ("1.5", None), "its end finds it"


def _redrawn(request_id: str) -> None:
    """Wait for the redraw a card's post left to a thread of its own (started before the
    post returned: alive, or done)."""
    for redraw in [t for t in threading.enumerate() if t.name == f"card-redraw-{request_id}"]:
        redraw.join(10)
        assert not redraw.is_alive()


def test_a_card_left_out_of_date_is_redrawn(tmp_path):
    db, notifier, announcer = announcer_on(tmp_path)
    seeded = seed_request(db)
    notifier.failing = False
    announcer.post_card(seeded.request_id)
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        ApprovalRepository(s).finish(request, status=RequestStatus.RESOLVED, outcome="done")
    assert announcer.repair_cards() == 1
    assert notifier.updated == [RequestStatus.RESOLVED]
    assert announcer.repair_cards() == 0, "the card now shows what the request is"


def _finished(db, status: RunStatus, text: str):  # type: ignore[no-untyped-def]
    """A seeded request's run, ended with ``status``; the seed and the run's view."""
    seeded = seed_request(db)
    with db.transaction() as s:
        run = RunRepository(s).get(seeded.run_id)
        RunRepository(s).set_status(run, status, result_text=text)
        return seeded, run_view(run)


def test_a_result_that_did_not_reach_the_thread_is_posted_later_once(tmp_path):
    db, notifier, announcer = announcer_on(tmp_path)
    seeded, view = _finished(db, RunStatus.COMPLETED, "sent")
    announcer.run_finished(view)
    settled = utcnow() + dt.timedelta(seconds=1)
    notifier.failing = False
    assert announcer.post_missing_results(settled_before=settled) == 1
    assert announcer.post_missing_results(settled_before=settled) == 0
    assert notifier.results == [seeded.run_id]


def test_a_missing_result_whose_retry_fails_too_is_retried_again(tmp_path):
    """Marking the result posted is how one replica wins its retry; a retry that fails gives
    that mark back, or the thread would never hear how its run ended."""
    db, notifier, announcer = announcer_on(tmp_path)
    seeded, view = _finished(db, RunStatus.COMPLETED, "sent")
    notifier.failing = True
    announcer.run_finished(view)
    settled = utcnow() + dt.timedelta(seconds=1)
    failed_at = utcnow()
    assert announcer.post_missing_results(settled_before=settled) == 0, "Slack still down"
    with db.transaction() as s:  # put back: behind the others, tried once settled again
        put_back = RunRepository(s).get(seeded.run_id)
        assert put_back is not None and put_back.updated_at >= failed_at
    notifier.failing = False
    later = utcnow() + dt.timedelta(seconds=1)
    assert announcer.post_missing_results(settled_before=later) == 1
    assert notifier.results == [seeded.run_id]


def test_a_result_that_reached_the_thread_is_not_posted_again(tmp_path):
    db, notifier, announcer = announcer_on(tmp_path)
    seeded, view = _finished(db, RunStatus.FAILED, "no")
    notifier.failing = False
    announcer.run_finished(view)
    assert announcer.post_missing_results(settled_before=utcnow() + dt.timedelta(seconds=1)) == 0
    assert notifier.results == [seeded.run_id]


def _posted_card(tmp_path):  # type: ignore[no-untyped-def]
    """A pending request whose card is posted, and its view as a completing decision shows
    it ("resuming")."""
    db, notifier, announcer = announcer_on(tmp_path)
    seeded = seed_request(db)
    notifier.failing = False
    announcer.post_card(seeded.request_id)
    with db.transaction() as s:
        assert ClaimRepository(s).claim(
            seeded.request_id, owner="me", lease=dt.timedelta(minutes=1)
        )
        resuming = approval_view(ApprovalRepository(s).get(seeded.request_id))
    return db, notifier, announcer, resuming


def test_a_resume_that_ends_sooner_updates_the_card_once(tmp_path):
    """The body drew the end itself before ``after`` ran out: no "resuming" update."""
    db, notifier, announcer, resuming = _posted_card(tmp_path)
    with announcer.showing_card(resuming, after=60.0):
        with db.transaction() as s:
            request = ApprovalRepository(s).get(resuming.id)
            ApprovalRepository(s).finish(request, status=RequestStatus.RESOLVED, outcome="done")
            done = approval_view(request)
        announcer.show_card(done)
    assert notifier.updated == [RequestStatus.RESOLVED]


def test_a_long_resume_shows_it_is_under_way_while_it_runs(tmp_path):
    """The body waits for the card to say "resuming" (it would wait forever without it)."""
    _db, notifier, announcer, resuming = _posted_card(tmp_path)
    shown = threading.Event()
    notifier.on_update = shown.set
    with announcer.showing_card(resuming, after=0.01):
        assert shown.wait(30)
    assert notifier.updated == [RequestStatus.RESUMING]


def test_a_resume_that_raised_leaves_the_card_saying_it_is_under_way(tmp_path):
    _db, notifier, announcer, resuming = _posted_card(tmp_path)
    with pytest.raises(RuntimeError), announcer.showing_card(resuming, after=60.0):
        raise RuntimeError("the database went away")
    assert notifier.updated == [RequestStatus.RESUMING]


def test_a_card_left_with_its_buttons_by_a_resume_that_died_is_redrawn(tmp_path):
    """A quick resume draws only its end; a process that died before it (within
    ``showing_card``'s wait) leaves the card with buttons on a request being resumed: the
    background repair draws it as it is, once."""
    _db, notifier, announcer, resuming = _posted_card(tmp_path)
    assert announcer.repair_cards() == 1
    assert notifier.updated == [RequestStatus.RESUMING]
    assert announcer.repair_cards() == 0, "the card now shows what the request is"
    assert resuming.status == RequestStatus.RESUMING


def _die_after_it_lands(notifier: FlakyNotifier, status: str) -> Callable[[ApprovalView], None]:
    """After a drawing with ``status`` reaches Slack, the process is dead: nothing of it is
    marked, and no later call of it reaches Slack."""

    def land(view: ApprovalView) -> None:
        if view.status == status:
            notifier.failing = True
            raise TimeoutError("the process died")

    return land


def _close(db: Database, request_id: str) -> ApprovalView:
    with db.transaction() as s:
        request = ApprovalRepository(s).get(request_id)
        ApprovalRepository(s).finish(request, status=RequestStatus.RESOLVED, outcome="done")
        return approval_view(request)


def test_an_under_way_drawing_in_flight_when_the_process_dies_is_repaired(tmp_path):
    """The resume's "under way" update is still on its way when the resume draws its end; it
    reaches Slack last, and the process dies before checking it. The end, which overlapped
    it, was not marked as shown: the next process's repair draws it again. Nothing waited
    for the update in flight (the end landed first)."""
    db, notifier, announcer, resuming = _posted_card(tmp_path)
    in_flight, end_landed = threading.Event(), threading.Event()
    dies = _die_after_it_lands(notifier, RequestStatus.RESUMING)

    def hold_the_update(view: ApprovalView) -> None:
        if view.status == RequestStatus.RESUMING:
            in_flight.set()
            assert end_landed.wait(30), "the end waited for the update in flight"

    def land(view: ApprovalView) -> None:
        if view.status == RequestStatus.RESOLVED:
            end_landed.set()
        dies(view)

    notifier.before_update, notifier.after_update = hold_the_update, land
    with announcer.showing_card(resuming, after=0.0):
        assert in_flight.wait(30)
        announcer.show_card(_close(db, resuming.id))
    notifier.failing, notifier.before_update, notifier.after_update = False, None, None
    announcer.repair_cards()  # the next process
    shown = [RequestStatus.RESOLVED, RequestStatus.RESUMING, RequestStatus.RESOLVED]
    assert notifier.updated == shown
    assert card_of(db, resuming.id)[1] == RequestStatus.RESOLVED


@pytest.mark.parametrize("dies", [False, True], ids=["lives", "dies"])
def test_the_last_of_two_overlapping_updates_to_come_back_draws_the_card_alone(tmp_path, dies):
    """The older update lands last but its answer comes back first; the newer one's answer
    comes back after it. Neither may be marked as shown: the last one back draws the card
    once more, alone, and that one is marked. If the process dies before that drawing
    lands, the store says the card may show the older one, and the repair draws it."""
    db, notifier, announcer, resuming = _posted_card(tmp_path)
    in_flight, end_landed = threading.Event(), threading.Event()

    def hold_the_update(view: ApprovalView) -> None:
        if view.status == RequestStatus.RESUMING:
            in_flight.set()
            assert end_landed.wait(30)

    older = threading.Thread(target=announcer.show_card, args=(resuming,))

    def back_after_the_older(view: ApprovalView) -> None:
        if view.status == RequestStatus.RESOLVED and not end_landed.is_set():
            end_landed.set()
            older.join(30)  # the older update lands and its answer comes back first
            notifier.failing = dies

    notifier.before_update, notifier.after_update = hold_the_update, back_after_the_older
    older.start()
    assert in_flight.wait(30)
    announcer.show_card(_close(db, resuming.id))
    assert not older.is_alive()
    notifier.failing, notifier.before_update, notifier.after_update = False, None, None
    if dies:
        assert card_of(db, resuming.id)[1] != RequestStatus.RESOLVED, "what the repair sees"
        assert announcer.repair_cards() == 1
    assert notifier.drawn[-1].status == RequestStatus.RESOLVED, notifier.updated
    assert card_of(db, resuming.id)[1] == RequestStatus.RESOLVED
    assert announcer.repair_cards() == 0


def test_an_under_way_drawing_is_never_sent_after_the_end_it_precedes(tmp_path):
    """The resume drew its end, then failed (recording what followed, say), which lets the
    "under way" update go: it must not go out after the end, for the process may die before
    checking it, and the card would say "resuming" for good."""
    db, notifier, announcer, resuming = _posted_card(tmp_path)
    notifier.after_update = _die_after_it_lands(notifier, RequestStatus.RESUMING)
    with pytest.raises(RuntimeError), announcer.showing_card(resuming, after=60.0):
        announcer.show_card(_close(db, resuming.id))
        raise RuntimeError("the run's result could not be recorded")
    notifier.failing, notifier.after_update = False, None
    announcer.repair_cards()  # the next process
    assert notifier.updated == [RequestStatus.RESOLVED]
    assert card_of(db, resuming.id)[1] == RequestStatus.RESOLVED


def test_two_overlapping_under_way_updates_leave_a_card_with_buttons_to_the_repair(tmp_path):
    """The resume's "under way" update and the repair's overlap while the card still shows
    its buttons; the process dies. The row must still say the card may show its buttons:
    that is the only way the repair looks at a card being resumed."""
    db, notifier, announcer, resuming = _posted_card(tmp_path)
    in_flight, release = threading.Event(), threading.Event()

    def hold_the_first(view: ApprovalView) -> None:
        if not in_flight.is_set():
            in_flight.set()
            assert release.wait(30)

    def die(view: ApprovalView) -> None:
        notifier.failing = True
        raise TimeoutError("the process died")

    notifier.before_update = hold_the_first
    first = threading.Thread(target=announcer.show_card, args=(resuming,))
    first.start()
    assert in_flight.wait(30)
    notifier.after_update = die
    announcer.show_card(resuming)  # the repair's, overlapping; it lands, then the process dies
    release.set()
    first.join(30)
    assert card_of(db, resuming.id)[1] == RequestStatus.PENDING
    notifier.failing, notifier.before_update, notifier.after_update = False, None, None
    assert announcer.repair_cards() == 1  # the next process
    assert card_of(db, resuming.id)[1] == RequestStatus.RESUMING


def test_while_updates_of_a_card_overlap_the_repair_would_find_it(posted_card):
    """Two decisions' redraws of a pending card overlap, the older one still on its way: if
    the process died now, it could land last, the status alike. The row says nothing is
    known of the card until the last one is back, which draws it once more, alone."""
    db, notifier, announcer, seeded = posted_card
    older, newer = _decide(db, seeded), _decide(db, seeded)
    in_flight, release = threading.Event(), threading.Event()

    def hold_the_older(view: ApprovalView) -> None:
        if decisions_on(view) == 1:
            in_flight.set()
            assert release.wait(30)

    notifier.before_update = hold_the_older
    first = threading.Thread(target=announcer.show_card, args=(older,))
    first.start()
    assert in_flight.wait(30)
    announcer.show_card(newer)
    with db.transaction() as s:
        listed = [r.id for r in MaintenanceQueries(s).cards_out_of_date()]
    release.set()
    first.join(30)
    assert listed == [seeded.request_id], "a process dying now would leave it unrepaired"
    assert [decisions_on(view) for view in notifier.drawn] == [2, 1, 2]
    assert card_of(db, seeded.request_id)[1] == RequestStatus.PENDING


def test_an_update_that_failed_is_left_to_the_repair_even_with_the_status_alike(posted_card):
    """A decision's redraw fails: the card shows one decision fewer, the status alike. The
    repair must still find it."""
    db, notifier, announcer, seeded = posted_card
    notifier.failing = True
    announcer.show_card(_decide(db, seeded))
    notifier.failing = False
    assert announcer.repair_cards() == 1
    assert [len(view.actions[0].decisions) for view in notifier.drawn] == [1]
    assert announcer.repair_cards() == 0


def test_nothing_older_goes_out_after_an_update_that_failed(posted_card):
    """A failed update may have reached Slack all the same (its answer lost)."""
    db, notifier, announcer, seeded = posted_card
    with db.transaction() as s:
        before = approval_view(ApprovalRepository(s).get(seeded.request_id))
    notifier.failing = True
    announcer.show_card(_decide(db, seeded))
    notifier.failing = False
    announcer.show_card(before)
    assert notifier.drawn == []


def test_an_older_drawing_is_not_sent_once_this_process_sent_a_later_one(posted_card):
    """A reviewer's decision drawn by one worker after another worker drew the next one (the
    end, say): the older drawing could only land last."""
    db, notifier, announcer, seeded = posted_card
    with db.transaction() as s:
        before = approval_view(ApprovalRepository(s).get(seeded.request_id))
    announcer.show_card(_decide(db, seeded))
    announcer.show_card(before)
    assert [len(view.actions[0].decisions) for view in notifier.drawn] == [1]


def test_a_card_of_unknown_drawing_is_repaired_while_resuming(tmp_path):
    """A decision's redraw failed (what the card shows is unknown: its buttons, maybe), then
    the last decision claimed the request and the process died before drawing it again."""
    db, notifier, announcer, resuming = _posted_card(tmp_path)
    with db.transaction() as s:  # as the failed redraw left it, before the claim
        ApprovalRepository(s).get(resuming.id).card_status = None
    assert announcer.repair_cards() == 1
    assert notifier.updated == [RequestStatus.RESUMING]
    assert card_of(db, resuming.id)[1] == RequestStatus.RESUMING


@pytest.fixture
def pg_card(migrated_pg_url):  # type: ignore[no-untyped-def]
    """On PostgreSQL: a pending request whose card is posted."""
    db = Database(migrated_pg_url)
    yield _with_posted_card(db)
    db.dispose()


def _with_posted_card(db: Database):  # type: ignore[no-untyped-def]
    notifier = FlakyNotifier(failing=False)
    announcer = Announcer(db=db, notifier=notifier, locks=ThreadLocks(db))
    seeded = seed_request(db)
    announcer.post_card(seeded.request_id)
    return db, notifier, announcer, seeded


def _autocommit_of(db: Database, prefix: str) -> list[bool]:
    """Whether each statement starting with ``prefix`` from now on ran in autocommit (its
    own transaction) or inside one; the list grows as they are sent."""
    marks: list[bool] = []

    def note(conn, _cursor, statement, *_rest):  # type: ignore[no-untyped-def]
        if statement.startswith(prefix):
            marks.append(conn.connection.driver_connection.autocommit)

    event.listen(db.engine, "before_cursor_execute", note)
    return marks


def test_remembering_what_a_card_shows_is_one_statement_with_no_transaction_around_it(pg_card):
    """On PostgreSQL the mark is its own transaction: no BEGIN and COMMIT round trips for
    what every decision and every resume does once more."""
    db, notifier, announcer, seeded = pg_card
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        ApprovalRepository(s).finish(request, status=RequestStatus.RESOLVED, outcome="done")
        done = approval_view(request)
    marks = _autocommit_of(db, "UPDATE approval_requests SET card_status")
    announcer.show_card(done)
    assert notifier.updated == [RequestStatus.RESOLVED]
    assert card_of(db, seeded.request_id)[1] == RequestStatus.RESOLVED
    assert marks == [True], "the mark ran inside a transaction of its own making"


def test_a_mark_refused_on_postgresql_draws_the_card_again_as_it_is_now(pg_card):
    """Drawn just before a cancel that another thread drew first: the mark (autocommit) finds
    the request moved on, and the card is drawn once more from the row."""
    db, notifier, announcer, seeded = pg_card
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        drawn = approval_view(request)  # still pending when drawn
        ApprovalRepository(s).finish(request, status=RequestStatus.CANCELLED, outcome="x")
    announcer.show_card(drawn)
    assert notifier.updated == [RequestStatus.PENDING, RequestStatus.CANCELLED]
    assert card_of(db, seeded.request_id)[1] == RequestStatus.CANCELLED


def test_a_posted_result_is_remembered_in_one_statement_with_no_transaction_around_it(pg_card):
    """Every finished run does it once, after its result reached the thread: on PostgreSQL
    no BEGIN and COMMIT round trips around the one statement."""
    db, notifier, announcer, seeded = pg_card
    with db.transaction() as s:
        run = RunRepository(s).get(seeded.run_id)
        RunRepository(s).set_status(run, RunStatus.COMPLETED, result_text="sent")
        view = run_view(run)
    marks = _autocommit_of(db, "UPDATE runs SET result_posted")
    announcer.run_finished(view)
    assert notifier.results == [seeded.run_id]
    assert marks == [True], "the mark ran inside a transaction of its own making"
    settled = utcnow() + dt.timedelta(seconds=1)
    assert announcer.post_missing_results(settled_before=settled) == 0, "remembered as posted"


@pytest.fixture(params=["sqlite", "postgresql"])
def posted_card(request, tmp_path):  # type: ignore[no-untyped-def]
    """A pending request whose card is posted, on either store."""
    if request.param == "sqlite":
        db = sqlite_store(tmp_path)
    else:
        db = Database(request.getfixturevalue("migrated_pg_url"))
    yield _with_posted_card(db)
    db.dispose()


def _elsewhere(announcer: Announcer) -> Announcer:
    """Another process's announcer, on the same store and Slack."""
    return Announcer(db=announcer.db, notifier=announcer.notifier, locks=announcer.locks)


def _decide(db: Database, seeded) -> ApprovalView:  # type: ignore[no-untyped-def]
    """A reviewer's decision that leaves the request pending (one approval of two)."""
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        DecisionRepository(s).add(
            request.actions[0], reviewer_id="U0REL1", team_id="T1", type_="approve", message=None
        )
        return approval_view(request)


def test_a_card_drawn_before_a_decision_that_reaches_slack_last_is_drawn_again(posted_card):
    """Two redraws of a pending card cross on their way to Slack, and the one drawn before a
    reviewer's decision arrives last: the status alike, the decision tells that it is out of
    date, and the card is drawn once more, with the decision on it."""
    db, notifier, announcer, seeded = posted_card
    with db.transaction() as s:
        before = approval_view(ApprovalRepository(s).get(seeded.request_id))
    after = _decide(db, seeded)
    announcer.show_card(after)
    _elsewhere(announcer).show_card(before)  # the older drawing reaches Slack last
    shown = [len(view.actions[0].decisions) for view in notifier.drawn]
    assert shown == [1, 0, 1], shown
    assert card_of(db, seeded.request_id)[1] == RequestStatus.PENDING


def test_a_card_drawn_as_the_request_is_now_is_drawn_once(posted_card):
    db, notifier, announcer, seeded = posted_card
    announcer.show_card(_decide(db, seeded))
    assert [len(view.actions[0].decisions) for view in notifier.drawn] == [1]


def test_a_card_whose_redraw_failed_after_a_refused_mark_is_left_to_the_repair(posted_card):
    """The older drawing reached Slack last and its redraw failed (or the process died before
    it): the card shows fewer decisions than recorded, the status alike. The refused mark
    forgets what the card shows, so the repair redraws it."""
    db, notifier, announcer, seeded = posted_card
    with db.transaction() as s:
        before = approval_view(ApprovalRepository(s).get(seeded.request_id))
    announcer.show_card(_decide(db, seeded))

    def fail_from_now_on() -> None:
        notifier.failing = True

    notifier.on_update = fail_from_now_on
    _elsewhere(announcer).show_card(before)  # reaches Slack; its redraw does not
    notifier.failing, notifier.on_update = False, None
    assert [len(view.actions[0].decisions) for view in notifier.drawn] == [1, 0]
    assert announcer.repair_cards() == 1
    assert [len(view.actions[0].decisions) for view in notifier.drawn] == [1, 0, 1]
    assert card_of(db, seeded.request_id)[1] == RequestStatus.PENDING
    assert announcer.repair_cards() == 0, "the card now shows what the request is"


def test_an_older_drawing_that_lands_after_the_end_is_left_to_the_repair(posted_card):
    """The end was drawn and marked first; the drawing made while the request was pending
    reaches Slack last, and its redraw fails. What the card shows is put back to what that
    drawing showed, so the repair finds the card out of date and draws the end again."""
    db, notifier, announcer, seeded = posted_card
    with db.transaction() as s:
        request = ApprovalRepository(s).get(seeded.request_id)
        pending = approval_view(request)
        ApprovalRepository(s).finish(request, status=RequestStatus.RESOLVED, outcome="done")
        done = approval_view(request)
    announcer.show_card(done)

    def fail_from_now_on() -> None:
        notifier.failing = True

    notifier.on_update = fail_from_now_on
    _elsewhere(announcer).show_card(pending)  # reaches Slack; its redraw does not
    notifier.failing, notifier.on_update = False, None
    assert announcer.repair_cards() == 1
    assert notifier.updated[-1] == RequestStatus.RESOLVED
    assert card_of(db, seeded.request_id)[1] == RequestStatus.RESOLVED


def test_a_card_that_cannot_be_posted_or_redrawn_does_not_stop_the_others(tmp_path, monkeypatch):
    """Maintenance goes card by card: one whose post or redraw raises (a bug, a row it cannot
    draw) is logged and left for the next round; the others are posted and redrawn."""
    db, notifier, announcer = announcer_on(tmp_path)
    first, second = seed_request(db), seed_request(db)
    notifier.failing = False
    post_card, show_card = announcer.post_card, announcer.show_card

    def posting(request_id, **kwargs):  # type: ignore[no-untyped-def]
        if request_id == first.request_id:
            raise ValueError("cannot draw this one")
        return post_card(request_id, **kwargs)

    monkeypatch.setattr(announcer, "post_card", posting)
    assert announcer.retry_card_posts(created_before=utcnow() + dt.timedelta(seconds=1)) == 1
    assert notifier.posted == [second.request_id]

    with db.transaction() as s:
        for seeded in (first, second):
            request = ApprovalRepository(s).get(seeded.request_id)
            request.card_channel, request.card_ts, request.card_status = "C1", "9.9", "stale"

    def showing(view):  # type: ignore[no-untyped-def]
        if view.id == first.request_id:
            raise ValueError("cannot draw this one")
        return show_card(view)

    monkeypatch.setattr(announcer, "show_card", showing)
    assert announcer.repair_cards() == 1
    assert [v.id for v in notifier.drawn] == [second.request_id]
