"""The in-process bus delivers concurrently but never two scrape batches at once."""

from __future__ import annotations

import threading
import time

from gleaner.bus.coalesce import merge_pages
from gleaner.bus.local import LocalBus
from gleaner.errors import PermanentError, RetryableError
from gleaner.messages import CrawlMapped, FetchedPage, PagesFetched, ScrapeBatch, SnapshotsWritten


def _batch(no: int) -> ScrapeBatch:
    return ScrapeBatch(run_id="r", site_domain="s", batch_no=no, document_ids=(f"d{no}",))


def test_scrape_batches_run_one_at_a_time_while_other_messages_overlap_them() -> None:
    bus = LocalBus(concurrency=4)
    lock = threading.Lock()
    active = {"scrape": 0, "max_scrape": 0, "overlapped": 0}

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        with lock:
            active["scrape"] += 1
            active["max_scrape"] = max(active["max_scrape"], active["scrape"])
        bus.publish(CrawlMapped(run_id=f"after-{message.batch_no}", site_domain="s"))
        time.sleep(0.02)
        with lock:
            active["scrape"] -= 1

    def downstream(message: CrawlMapped) -> None:  # type: ignore[override]
        with lock:
            if active["scrape"]:
                active["overlapped"] += 1

    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    bus.subscribe(CrawlMapped.topic, downstream)  # type: ignore[arg-type]
    for no in range(5):
        assert bus.enqueue(_batch(no))
    assert not bus.enqueue(_batch(0))
    delivered: list[str] = []
    bus.drain(on_dispatch=lambda m: delivered.append(m.topic))

    assert active["max_scrape"] == 1
    assert active["overlapped"] >= 1
    assert delivered.count(ScrapeBatch.topic) == 5 and delivered.count(CrawlMapped.topic) == 5
    assert bus.pending() == 0


def test_errors_keep_their_meaning_when_delivery_is_concurrent() -> None:
    bus = LocalBus(concurrency=3, backoff_seconds=0.0, max_attempts=3)
    calls: dict[int, int] = {}

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        calls[message.batch_no] = calls.get(message.batch_no, 0) + 1
        if message.batch_no == 0:
            raise PermanentError("bad input")
        if message.batch_no == 1:
            raise RetryableError("still down")
        if message.batch_no == 2 and calls[2] == 1:
            raise RetryableError("once")

    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    for no in range(3):
        bus.enqueue(_batch(no))
    bus.drain()

    assert calls == {0: 1, 1: 3, 2: 2}
    assert [d.message.batch_no for d in bus.dead_letters] == [1]  # type: ignore[attr-defined]


def test_what_the_bus_gives_up_on_is_handed_over_with_the_reason_and_retries_back_off_to_a_cap() -> None:
    given_up: list[tuple[int, str]] = []
    bus = LocalBus(concurrency=2, backoff_seconds=0.0, max_attempts=2,
                   on_give_up=lambda m, why: given_up.append((m.batch_no, why)))  # type: ignore[attr-defined]

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        raise PermanentError("bad input") if message.batch_no == 0 else RetryableError("disk full")

    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    bus.enqueue(_batch(0))
    bus.enqueue(_batch(1))
    bus.drain()

    assert sorted(given_up) == [(0, "permanent error: bad input"),
                                (1, "dead-lettered after 2 attempts: disk full")]
    capped = LocalBus(backoff_seconds=0.5, max_backoff_seconds=8.0)
    assert [capped.retry_delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def _run_batch(run: str, no: int) -> ScrapeBatch:
    return ScrapeBatch(run_id=run, site_domain=f"{run}.example", batch_no=no, document_ids=(f"{run}-{no}",))


def test_scrape_batches_of_different_runs_overlap_but_no_more_than_max_runs_are_under_way() -> None:
    bus = LocalBus(concurrency=8, max_runs=2)
    lock = threading.Lock()
    active: dict[str, int] = {}
    seen = {"most_runs": 0, "most_of_one_run": 0}

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        with lock:
            active[message.run_id] = active.get(message.run_id, 0) + 1
            seen["most_runs"] = max(seen["most_runs"], len(active))
            seen["most_of_one_run"] = max(seen["most_of_one_run"], active[message.run_id])
        time.sleep(0.02)
        with lock:
            active[message.run_id] -= 1
            if not active[message.run_id]:
                del active[message.run_id]

    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    for run in ("a", "b", "c"):
        for no in range(3):
            bus.enqueue(_run_batch(run, no))
    delivered: list[str] = []
    bus.drain(on_dispatch=lambda m: delivered.append(m.run_id))  # type: ignore[attr-defined]

    assert seen == {"most_runs": 2, "most_of_one_run": 1}
    assert sorted(delivered) == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    assert bus.runs_under_way() == set()


def test_an_unexpected_error_in_one_run_gives_up_that_message_and_the_other_runs_go_on() -> None:
    given_up: list[tuple[str, str]] = []
    bus = LocalBus(concurrency=4, isolate=True,
                   on_give_up=lambda m, why: given_up.append((m.run_id, why)))  # type: ignore[attr-defined]
    done: list[str] = []

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        if message.run_id == "broken":
            raise KeyError("a bug")
        done.append(message.run_id)

    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    for run in ("broken", "fine", "also-fine"):
        bus.enqueue(_run_batch(run, 0))
    bus.drain()

    assert sorted(done) == ["also-fine", "fine"]
    assert given_up == [("broken", "unexpected error: KeyError: 'a bug'")]


def test_a_drain_kept_open_takes_a_message_published_from_outside_at_once_and_ends_when_told() -> None:
    bus = LocalBus(concurrency=4)
    release = threading.Event()
    started: dict[str, float] = {}
    ended: list[str] = []

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        started[message.run_id] = time.monotonic()
        release.wait(10)  # a long batch in flight: nothing else ends meanwhile

    def mapped(message: CrawlMapped) -> None:  # type: ignore[override]
        started[message.run_id] = time.monotonic()

    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    bus.subscribe(CrawlMapped.topic, mapped)  # type: ignore[arg-type]
    bus.enqueue(_batch(0))
    until = threading.Event()
    drainer = threading.Thread(target=bus.drain, kwargs={"until": until,
                                                         "on_dispatch": lambda m: ended.append(m.run_id)})
    drainer.start()
    try:
        while "r" not in started:
            time.sleep(0.01)
        assert bus.active("r")
        published = time.monotonic()
        bus.publish(CrawlMapped(run_id="later", site_domain="t"))  # as a watch's tick does, from its thread
        while "later" not in started:
            assert time.monotonic() - published < 5, "the message waited for the batch in flight"
            time.sleep(0.01)
        until.set()
        bus.wake()
        time.sleep(0.3)
        assert drainer.is_alive()  # told to end, but a batch is still in flight
    finally:
        release.set()
        until.set()
        bus.wake()
        drainer.join(10)
    assert not drainer.is_alive()
    assert ended == ["later", "r"] and not bus.active("r")


def _pages(run: str, *docs: str) -> PagesFetched:
    return PagesFetched(run_id=run, site_domain="s", batch_no=1, pages=tuple(
        FetchedPage(document_id=d, content_hash="c" + d, raw_hash="r" + d, content_key=None, raw_key=None,
                    fetch_status=200, fetch_time_ms=1, byte_size=1) for d in docs))


def test_queued_pages_and_snapshots_of_one_run_reach_their_stage_together_each_page_once() -> None:
    bus = LocalBus(concurrency=4)
    got: list[tuple[str, tuple[str, ...]]] = []
    lock = threading.Lock()

    def snapshot(message: PagesFetched) -> None:  # type: ignore[override]
        with lock:
            got.append((message.run_id, tuple(p.document_id for p in message.pages)))

    def ingest(message: SnapshotsWritten) -> None:  # type: ignore[override]
        with lock:
            got.append(("ingest " + str(message.run_id), message.snapshot_ids))

    bus.subscribe(PagesFetched.topic, snapshot)  # type: ignore[arg-type]
    bus.subscribe(SnapshotsWritten.topic, ingest)  # type: ignore[arg-type]
    bus.publish(_pages("a", "1", "2"))
    bus.publish(_pages("b", "9"))
    bus.publish(_pages("a", "3"))
    bus.publish(_pages("a", "2"))  # announced again (a redelivered batch): snapshotted on its own, as published
    for ids in (("s1",), ("s2", "s1"), ("s3",)):
        bus.publish(SnapshotsWritten(run_id="a", site_domain="s", snapshot_ids=ids))
    bus.drain()
    assert sorted(got) == [("a", ("1", "2", "3")), ("a", ("2",)), ("b", ("9",)),
                           ("ingest a", ("s1", "s2", "s3"))]
    assert not bus.active("a") and not bus.active("b") and bus.pending() == 0


def test_pages_of_one_run_waiting_past_a_batch_worth_go_in_more_than_one_message() -> None:
    bus = LocalBus(concurrency=1, merges={PagesFetched.topic: merge_pages})
    sizes: list[int] = []
    bus.subscribe(PagesFetched.topic, lambda m: sizes.append(len(m.pages)))  # type: ignore[attr-defined]
    for n in range(15):
        bus.publish(_pages("a", *(f"{n}-{i}" for i in range(10))))
    bus.drain(until=_set_event())
    assert sizes == [100, 50]
    assert not bus.active("a")


def _set_event() -> threading.Event:
    done = threading.Event()
    done.set()
    return done


def test_a_runs_pages_handed_on_while_its_snapshot_is_in_flight_wait_and_go_as_one() -> None:
    bus = LocalBus(concurrency=4)
    started, release = threading.Event(), threading.Event()
    got: list[tuple[str, tuple[str, ...]]] = []
    busy_during: list[bool] = []

    def snapshot(message: PagesFetched) -> None:  # type: ignore[override]
        got.append((message.run_id, tuple(p.document_id for p in message.pages)))
        if message.pages[0].document_id == "1":  # the first lump is slow to store
            started.set()
            release.wait(10)

    def scrape(message: ScrapeBatch) -> None:  # type: ignore[override]
        bus.publish(_pages("a", "1"))
        assert started.wait(10)
        busy_during.append(bus.busy("a", (PagesFetched.topic,)))
        bus.publish(_pages("a", "2"))  # handed on while the first is being stored: they wait, then go as one
        bus.publish(_pages("a", "3"))
        bus.publish(_pages("b", "9"))  # another run's pages do not wait for run a's
        deadline = time.monotonic() + 10
        while ("b", ("9",)) not in got and time.monotonic() < deadline:
            time.sleep(0.01)
        release.set()

    bus.subscribe(PagesFetched.topic, snapshot)  # type: ignore[arg-type]
    bus.subscribe(ScrapeBatch.topic, scrape)  # type: ignore[arg-type]
    bus.enqueue(_batch(0))
    bus.drain()

    assert got == [("a", ("1",)), ("b", ("9",)), ("a", ("2", "3"))]
    assert busy_during == [True] and not bus.busy("a", (PagesFetched.topic, SnapshotsWritten.topic))
