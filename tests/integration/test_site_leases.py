"""Batches of one site hold no more instances than its politeness can use (knowledge.site_leases),
and waiters for a host's shared turn ask the database once per spacing, not ten times a second."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from gleaner.cloud import taskentry
from gleaner.fetch.politeness import Turn
from gleaner.messages import ScrapeBatch, encode
from gleaner.store.registry.hostslots import HostSlots
from gleaner.store.registry.siteleases import SiteLease, SiteLeases, Waiter

RUN = "6f1c0e1e-0000-4000-8000-0000000000aa"


def _engine(database_url: str) -> sa.engine.Engine:
    from gleaner.settings.config import Settings
    from gleaner.store.backends import db

    return db.create_engine(Settings(database_url=database_url))


def test_a_sites_batches_beyond_its_concurrency_are_given_their_turns_one_after_another(database_url):
    engine = _engine(database_url)
    leases = SiteLeases(engine)
    first = leases.take("big.test", slots=1, expected=40.0, lease=100.0)
    assert isinstance(first, SiteLease)
    wait = leases.take("big.test", slots=1, expected=40.0, lease=100.0)
    assert isinstance(wait, float) and 35.0 < wait <= 40.0
    # The next one sent away waits behind it, rather than both coming back to find one slot.
    behind = leases.take("big.test", slots=1, expected=40.0, lease=100.0)
    assert isinstance(behind, float) and 75.0 < behind <= 80.0
    # Another site is not held up by the big one; a site allowing two at once takes a second slot.
    assert isinstance(leases.take("small.test", slots=1, expected=5.0, lease=10.0), SiteLease)
    assert isinstance(leases.take("wide.test", slots=2, expected=5.0, lease=10.0), SiteLease)
    assert isinstance(leases.take("wide.test", slots=2, expected=5.0, lease=10.0), SiteLease)
    assert isinstance(leases.take("wide.test", slots=2, expected=5.0, lease=10.0), float)
    leases.give_back(first)
    again = leases.take("big.test", slots=1, expected=40.0, lease=100.0)
    assert isinstance(again, SiteLease)
    leases.give_back(first)  # a slot given back twice does not free the new holder's
    assert isinstance(leases.take("big.test", slots=1, expected=40.0, lease=100.0), float)
    engine.dispose()


def test_a_holder_that_died_lets_its_sites_slot_go_when_its_lease_runs_out(database_url):
    engine = _engine(database_url)
    leases = SiteLeases(engine)
    assert isinstance(leases.take("gone.test", slots=1, expected=0.05, lease=0.2), SiteLease)
    assert isinstance(leases.take("gone.test", slots=1, expected=0.05, lease=0.2), float)
    deadline = time.monotonic() + 10
    while not isinstance(leases.take("gone.test", slots=1, expected=1.0, lease=5.0), SiteLease):
        assert time.monotonic() < deadline, "the dead holder's lease never ran out"
        time.sleep(0.05)
    engine.dispose()


def test_a_waiter_for_a_held_turn_is_told_to_come_back_after_one_spacing_not_a_tenth_of_a_second(database_url):
    engine = _engine(database_url)
    slots = HostSlots(engine)
    held = slots.claim("slow.test", concurrency=1, spacing=0.0, lease=30.0)
    assert isinstance(held, Turn)
    # The holder's request is still in flight past the host's next start: no start can come before it
    # releases, and its release adds the spacing, so asking again sooner cannot help.
    wait = slots.claim("slow.test", concurrency=1, spacing=1.5, lease=30.0)
    assert wait == 1.5
    slots.release(held, pause=1.5)
    after = slots.claim("slow.test", concurrency=1, spacing=1.5, lease=30.0)
    assert isinstance(after, float) and 1.0 < after <= 1.5  # the exact time of the next start
    engine.dispose()


class _DeferRecorder:
    """A bus that records what it is handed (the other verbs are not used by a deferred task)."""

    def __init__(self) -> None:
        self.deferred: list[tuple[ScrapeBatch, float]] = []

    def defer(self, batch: ScrapeBatch, seconds: float) -> bool:
        self.deferred.append((batch, seconds))
        return True

    def publish(self, message: Any, *, ordering_key: str | None = None) -> None:
        raise AssertionError("a deferred batch publishes nothing")


def _task(batch: ScrapeBatch) -> Any:
    return Request(EnvironBuilder(method="POST", data=encode(batch), headers={
        "Content-Type": "application/json", taskentry.TASK_RETRY_HEADER: "0"}).get_environ())


def test_a_task_whose_site_is_busy_answers_at_once_and_goes_back_to_the_queue(make_deps, database_url):
    from gleaner.app import Deps

    deps: Deps = make_deps(shared_politeness=True, host_delay=0.5, host_concurrency=1)
    bus = _DeferRecorder()
    deps.bus_override = bus  # type: ignore[assignment]
    engine = _engine(database_url)
    holder = SiteLeases(engine).take("busy.test", slots=1, expected=30.0, lease=60.0)
    assert isinstance(holder, SiteLease)
    batch = ScrapeBatch(run_id=RUN, site_domain="busy.test", batch_no=4, document_ids=("a", "b"))
    started = time.monotonic()
    body, status, _ = taskentry.run_task(_task(batch), ScrapeBatch, deps)
    assert status == 200 and time.monotonic() - started < 5.0
    answer = json.loads(body)
    assert answer["outcome"] == "deferred" and answer["task"] == f"{RUN}-4-d1"
    (again, seconds), = bus.deferred
    assert again.deferrals == 1 and again.document_ids == batch.document_ids
    assert 20.0 < seconds <= 30.0  # when the holder expects to be done, not a blind retry
    engine.dispose()


def test_a_batch_back_at_its_turn_to_find_the_holder_late_waits_for_the_holder_not_the_queue(database_url):
    engine = _engine(database_url)
    leases = SiteLeases(engine)
    assert isinstance(leases.take("late.test", slots=1, expected=5.0, lease=60.0), SiteLease)
    for _ in range(3):  # three batches sent away queue up behind the holder
        assert isinstance(leases.take("late.test", slots=1, expected=5.0, lease=60.0), float)
    back = leases.take("late.test", slots=1, expected=5.0, lease=60.0, queue=False)
    assert isinstance(back, float) and back <= 5.0
    engine.dispose()


class _QueueRecorder(_DeferRecorder):
    """A bus that also records the tasks sent at once, the delayed ones deleted, and what the stages
    publish; like Cloud Tasks, deleting a task that is not (or no longer) scheduled finds nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.enqueued: list[ScrapeBatch] = []
        self.published: list[Any] = []
        self.cancelled: list[str] = []

    def cancel(self, task_name: str) -> bool:
        scheduled = {b.task_name for b, _ in self.deferred} - set(self.cancelled)
        if task_name not in scheduled:
            return False
        self.cancelled.append(task_name)
        return True

    def enqueue(self, batch: ScrapeBatch) -> bool:
        self.enqueued.append(batch)
        return True

    def publish(self, message: Any, *, ordering_key: str | None = None) -> None:
        self.published.append(message)


def test_a_holder_that_finishes_sends_the_waiting_batch_at_once_and_its_delayed_copy_does_nothing(make_deps):
    from gleaner.cloud import siteleases

    deps = make_deps(shared_politeness=True, host_delay=0.5, host_concurrency=1)
    bus = _QueueRecorder()
    deps.bus_override = bus
    first = ScrapeBatch(run_id=RUN, site_domain="early.test", batch_no=0, document_ids=("a",) * 60)
    holder = siteleases.take(deps, first)
    assert isinstance(holder, SiteLease)
    waiting = ScrapeBatch(run_id=RUN, site_domain="early.test", batch_no=1, document_ids=("b",))
    answer = json.loads(taskentry.run_task(_task(waiting), ScrapeBatch, deps)[0])
    (later, seconds), = bus.deferred
    assert answer["outcome"] == "deferred" and seconds > 20.0  # the holder's expected end: 60 pages x 0.5 s
    # The holder is done long before that: the waiting batch goes now, under a name of its own.
    siteleases.give_back(deps, holder)
    (woken,), = [bus.enqueued]
    assert woken.task_name == f"{RUN}-1-d1-w" and woken.document_ids == waiting.document_ids
    # Its delayed copy is deleted: it would only be an invocation billed for nothing.
    assert bus.cancelled == [later.task_name]
    body, status, _ = taskentry.run_task(_task(woken), ScrapeBatch, deps)
    assert status == 200 and json.loads(body)["outcome"] == "done"
    # Should the delete come too late, the delayed copy arriving at the old turn finds the batch run and
    # neither runs nor waits again.
    body, status, _ = taskentry.run_task(_task(later), ScrapeBatch, deps)
    assert status == 200 and json.loads(body)["outcome"] == "run-by-other-copy"
    assert len(bus.deferred) == 1 and len(bus.enqueued) == 1


def test_a_delayed_copy_that_comes_first_runs_the_batch_and_the_woken_one_then_does_nothing(database_url):
    engine = _engine(database_url)
    leases = SiteLeases(engine)
    holder = leases.take("twice.test", slots=1, expected=5.0, lease=60.0)
    assert isinstance(holder, SiteLease)
    assert isinstance(leases.take("twice.test", slots=1, expected=5.0, lease=60.0,
                                  wait_as=Waiter("run-7-d1", b"first")), float)
    assert isinstance(leases.take("twice.test", slots=1, expected=5.0, lease=60.0,
                                  wait_as=Waiter("run-8-d1", b"second")), float)
    # The first waiter's delayed copy comes back to find the holder late: it keeps its place in line.
    assert isinstance(leases.take("twice.test", slots=1, expected=5.0, lease=60.0, queue=False, claim="run-7-d1",
                                  wait_as=Waiter("run-7-d2", b"first again")), float)
    assert leases.give_back(holder) == Waiter("run-7-d2", b"first again")
    # That copy's own delayed task arrives first: it takes the slot, and the woken copy then finds nothing.
    got = leases.take("twice.test", slots=1, expected=5.0, lease=60.0, queue=False, claim="run-7-d2")
    assert isinstance(got, SiteLease)
    assert leases.take("twice.test", slots=1, expected=5.0, lease=60.0, queue=False, claim="run-7-d2") is None
    assert leases.give_back(got) == Waiter("run-8-d1", b"second")  # the next one in line
    engine.dispose()


def test_a_runs_own_concurrency_and_delay_size_its_sites_batch_slots(make_deps):
    from gleaner import tenancy
    from gleaner.cloud import siteleases

    deps = make_deps(shared_politeness=True, host_delay=0.1, host_concurrency=2)
    run = "6f1c0e1e-0000-4000-8000-0000000000bb"
    with tenancy.scope("own.test"):
        host = deps.metadata.upsert_source_host("own.test", "127.0.0.9", own_site=True)
        deps.metadata.create_run(run, "own.test", host, "http://127.0.0.9/", {"politeness": {
            "host_delay": 2.0, "host_concurrency": 1}}, "manual", "api")
    deps.bus_override = _QueueRecorder()
    batch = ScrapeBatch(run_id=run, site_domain="own.test", batch_no=0, document_ids=("a", "b", "c"))
    assert siteleases.politeness(deps, batch) == (2.0, 1)
    assert isinstance(siteleases.take(deps, batch), SiteLease)
    # The settings would let two batches hold the site at once; the run asked for one.
    deferred = siteleases.take(deps, replace(batch, batch_no=1))
    assert isinstance(deferred, siteleases.Deferred) and deferred.seconds > 5.0  # 3 pages x the run's 2 s
    # A Crawl-delay in the run's robots.txt paces the batch too, though this process never met the host.
    with tenancy.scope("own.test"):
        deps.metadata.save_run_robots(run, "http://127.0.0.9", "rules", "ok", b"User-agent: *\nCrawl-delay: 4\n")
    assert siteleases.politeness(deps, batch) == (4.0, 1)


def test_a_batch_slower_than_its_expected_time_keeps_its_slot_and_the_next_batch_waits(make_deps, database_url,
                                                                                         monkeypatch):
    from gleaner.cloud import siteleases

    # A renewal window of 3 s (2 x 1 s fetch timeout + 1 s), renewed every second: without renewals the
    # one-page batch's lease (0.5 s expected + the window) runs out while it is still fetching.
    monkeypatch.setattr(siteleases, "LEASE_MARGIN_SECONDS", 1.0)
    deps = make_deps(shared_politeness=True, host_delay=0.5, host_concurrency=1, fetch_timeout=1.0)
    bus = _QueueRecorder()
    deps.bus_override = bus
    slow = ScrapeBatch(run_id=RUN, site_domain="slow.test", batch_no=0, document_ids=("a",))
    running, finish = threading.Event(), threading.Event()

    def still_fetching(message: Any, deps: Any) -> str:
        if message.batch_no == 0:  # the slow one
            running.set()
            assert finish.wait(60)
        return "done"

    monkeypatch.setattr(taskentry, "_dispatch", still_fetching)
    answers: list[Any] = []
    holder = threading.Thread(target=lambda: answers.append(taskentry.run_task(_task(slow), ScrapeBatch, deps)))
    holder.start()
    engine = _engine(database_url)
    try:
        assert running.wait(30)
        with engine.connect() as conn:  # wait, by the database's clock, until the lease it took is 1 s past
            taken_until = conn.execute(sa.text("SELECT clock_timestamp() + interval '4.5 seconds'")).scalar()
            deadline = time.monotonic() + 30
            while conn.execute(sa.text("SELECT clock_timestamp() < :t"), {"t": taken_until}).scalar():
                assert time.monotonic() < deadline
                time.sleep(0.2)
        second = ScrapeBatch(run_id=RUN, site_domain="slow.test", batch_no=1, document_ids=("b",))
        answer = json.loads(taskentry.run_task(_task(second), ScrapeBatch, deps)[0])
        assert answer.get("outcome") == "deferred", answer  # the slow batch still holds the site's only slot
    finally:
        finish.set()
        holder.join(30)
        engine.dispose()
    assert json.loads(answers[0][0])["outcome"] == "done"
    # Done, it sends for the batch that waited.
    assert [b.task_name for b in bus.enqueued] == [f"{RUN}-1-d1-w"]


class _FailingOnce(_QueueRecorder):
    """A bus whose scheduling of a delayed task fails once (Cloud Tasks unreachable for a moment)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_next = False

    def defer(self, batch: ScrapeBatch, seconds: float) -> bool:
        if self.fail_next:
            self.fail_next = False
            from gleaner.errors import RetryableError

            raise RetryableError("cannot create task: unavailable")
        return super().defer(batch, seconds)


def test_a_waiter_whose_fallback_could_not_be_scheduled_runs_on_its_retry_after_the_holder_died(make_deps,
                                                                                                database_url):
    deps = make_deps(shared_politeness=True, host_delay=0.5, host_concurrency=1)
    bus = _FailingOnce()
    deps.bus_override = bus
    engine = _engine(database_url)
    # A holder that will die: it never gives its slot back, and its lease ends in 3 s.
    assert isinstance(SiteLeases(engine).take("dies.test", slots=1, expected=0.5, lease=3.0), SiteLease)
    waiting = ScrapeBatch(run_id=RUN, site_domain="dies.test", batch_no=2, document_ids=("c",))
    assert json.loads(taskentry.run_task(_task(waiting), ScrapeBatch, deps)[0])["outcome"] == "deferred"
    (fallback, _), = bus.deferred
    # The fallback comes back while the holder still holds the slot, and sending it away again fails:
    # the task answers 503 and Cloud Tasks will deliver it again.
    bus.fail_next = True
    body, status, _ = taskentry.run_task(_task(fallback), ScrapeBatch, deps)
    assert status == 503, body
    deadline = time.monotonic() + 20
    with engine.connect() as conn:  # the holder's lease runs out
        while conn.execute(sa.text("SELECT bool_or(lease_until > clock_timestamp()) FROM knowledge.site_leases"
                                   " WHERE site = 'dies.test'")).scalar():
            assert time.monotonic() < deadline
            time.sleep(0.1)
            conn.rollback()
    # Its retry still finds its place, takes the free slot and runs the batch (before, it took itself
    # for its other copy and did nothing, and nobody was left to send for the waiter).
    body, status, _ = taskentry.run_task(_task(fallback), ScrapeBatch, deps)
    assert status == 200 and json.loads(body)["outcome"] == "done", body
    engine.dispose()
