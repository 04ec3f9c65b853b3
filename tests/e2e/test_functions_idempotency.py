"""At-least-once delivery: every message of a crawl delivered twice, concurrently, through the entry points.

Each message a stage emits is handed to its function's entry point (``run_event`` for Pub/Sub
CloudEvents, ``run_task`` for the Cloud Tasks request) twice at the same time, and whatever
those deliveries emit is delivered twice again. The final database and blobs must equal those
of a crawl where every message was delivered once: no duplicate snapshot, version, span or
blob, counters not double-counted, the run finished exactly once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from werkzeug.test import EnvironBuilder

from gleaner import entry
from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.demo import demo_pages
from gleaner.messages import Message, ScrapeBatch, decode, encode
from gleaner.runner import crawl, new_request
from gleaner.testsite import TestSite
from tests.cloud_fixtures import cloud_event, crawl_state
from tests.conftest import test_settings


class QueueBus:
    """Collects what the stages emit; task names dedupe like Cloud Tasks' do."""

    def __init__(self) -> None:
        self.queue: list[Message] = []
        self.names: set[str] = set()
        self.lock = threading.Lock()

    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        with self.lock:
            self.queue.append(decode(encode(message)))

    def enqueue(self, batch: ScrapeBatch) -> bool:
        with self.lock:
            if batch.task_name in self.names:
                return False
            self.names.add(batch.task_name)
            self.queue.append(batch)
        return True


def deliver(message: Message, deps: Deps, attempt: int = 1) -> Any:
    """One delivery through the function entry point that the message's trigger calls."""
    if isinstance(message, ScrapeBatch):
        request = EnvironBuilder(method="POST", data=encode(message),
                                 headers={"X-CloudTasks-TaskRetryCount": str(attempt - 1)}).get_request()
        body, status, _ = entry.run_task(request, ScrapeBatch, deps)
        assert status == 200, body
        return body
    return entry.run_event(cloud_event(encode(message)), type(message), deps)


def deliver_twice_concurrently(message: Message, deps: Deps) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run() -> None:
        barrier.wait()
        try:
            deliver(message, deps)
        except BaseException as exc:  # surfaced below with the message that caused it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"{type(message).__name__}: {errors[0]!r}"


def test_every_message_delivered_twice_concurrently_leaves_the_state_of_one_delivery(tmp_path: Path,
                                                                                      another_database):
    pages: dict = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        request = new_request(site.url + "/", site_domain="demo.test")

        # Small batches: several scrape tasks and snapshot messages race to finish the run.
        once = Deps(test_settings(tmp_path / "once", another_database(), scrape_batch_size=4),
                    bus_override=LocalBus())
        crawl(once, request)
        expected = crawl_state(once.engine, once.blobs, request.run_id)

        bus = QueueBus()
        twice = Deps(test_settings(tmp_path / "twice", another_database(), scrape_batch_size=4), bus_override=bus)
        bus.queue.append(request)
        delivered: dict[str, int] = {}
        while bus.queue:
            with bus.lock:
                message = bus.queue.pop(0)
            deliver_twice_concurrently(message, twice)
            delivered[type(message).__name__] = delivered.get(type(message).__name__, 0) + 2
            assert sum(delivered.values()) < 400, "deliveries keep multiplying"
        actual = crawl_state(twice.engine, twice.blobs, request.run_id)
    once.close()
    twice.close()
    assert set(delivered) == {"CrawlRequested", "CrawlMapped", "ScrapeBatch", "PagesFetched", "SnapshotsWritten"}
    assert delivered["ScrapeBatch"] >= 6
    assert expected["run"][0] == "finished" and expected["counts"]["document_snapshots"] > 10
    assert actual == expected


def test_a_second_delivery_after_the_crawl_changes_nothing(tmp_path: Path, make_deps):
    """Late duplicates (Pub/Sub may redeliver long after): every recorded message once more."""
    pages: dict = {}
    seen: list[Message] = []
    deps = make_deps()
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        request = new_request(site.url + "/", site_domain="demo.test")
        assert isinstance(deps.bus, LocalBus)
        crawl(deps, request, progress=lambda _topic, m: seen.append(m))
        before = crawl_state(deps.engine, deps.blobs, request.run_id)
        for message in [request, *seen]:
            deliver(message, deps)
        deps.bus.drain()  # what the late deliveries re-emitted is delivered too
        after = crawl_state(deps.engine, deps.blobs, request.run_id)
    assert after == before
