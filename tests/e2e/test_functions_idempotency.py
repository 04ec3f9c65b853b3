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

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.cloud import entry, taskentry
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.messages import Message, ScrapeBatch, decode, encode
from gleaner.runtime.runner import crawl, new_request
from tests.cloud_fixtures import cloud_event, crawl_state
from tests.conftest import test_settings


class QueueBus:
    """Collects what the stages emit; task names dedupe like Cloud Tasks' do."""

    def __init__(self) -> None:
        self.queue: list[Message] = []
        self.announced: list[Any] = []
        self.names: set[str] = set()
        self.lock = threading.Lock()

    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        with self.lock:
            self.queue.append(decode(encode(message)))

    def announce(self, event: Any) -> None:
        with self.lock:
            self.announced.append(event)

    def enqueue_delivery(self, delivery_id: str, not_before: Any = None) -> bool:
        return False

    def defer(self, batch: ScrapeBatch, seconds: float) -> bool:
        return self.enqueue(batch)

    def cancel(self, task_name: str) -> bool:
        return False  # defer enqueued at once: nothing held back

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
        body, status, _ = taskentry.run_task(request, ScrapeBatch, deps)
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


def test_a_map_redelivered_after_a_crash_still_opens_the_run_when_the_site_changed_meanwhile(make_deps):
    """The first delivery wrote links.json and died before committing; the site then gained a page.

    The redelivery discovers a different map: the first map JSON stands (blobs are create-only) and
    the run must still move on to sampling instead of staying in `mapping` for ever.
    """
    from gleaner.demosite.demo import article
    from gleaner.demosite.testsite import Page

    deps = make_deps()
    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        request = new_request(site.url + "/", site_domain="demo.test")
        assert deliver(request, deps) == "done"
        deps.metadata.set_run_status(request.run_id, "mapping")  # the crash: finish_map never committed
        pages["/about"] = Page(article("About us", "/about", links=("/careers",)))
        pages["/careers"] = Page(article("Careers", "/careers"))
        assert deliver(request, deps) == "done"
    assert deps.metadata.run_status(request.run_id) == "mapped"


def test_content_that_returns_to_an_earlier_version_with_other_raw_markup_still_settles(make_deps):
    """X -> Y -> X again, the third fetch's raw.md differing from the first's: the run must finish.

    Snapshot bodies are keyed by content hash, so the earlier version's raw.md already sits at the
    key; the stage must keep it (create-only) rather than fail the batch for ever.
    """
    import hashlib

    from gleaner.messages import FetchedPage, PagesFetched
    from gleaner.store.backends.blobs import run_content_key, run_raw_key, snapshot_content_key
    from gleaner.store.metadata import Decision, FetchRecord

    deps = make_deps()
    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        first = crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
        pages.update(demo_pages(site.url, changed=("/about",)))
        crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
    about = deps.metadata.document_by_url(site.url + "/about")
    assert about is not None
    v1 = deps.metadata.snapshots_of(about["id"])[-1]
    content = deps.blobs.get(snapshot_content_key("demo.test", about["id"], v1["content_hash"]))
    # A third run fetched /about again: the first content, but the raw page around it changed.
    meta, run = deps.metadata, "9a1c0e1e-0000-4000-8000-0000000000c3"
    host = meta.upsert_source_host("demo.test", "127.0.0.1", own_site=True)
    meta.create_run(run, "demo.test", host, site.url + "/", {}, "website_mapping", "api")
    meta.add_run_pages(run, [(about["id"], 1, "link")])
    meta.record_decisions(run, [Decision(about["id"], "include", "system", "test", 1.0, {})])
    meta.set_run_status(run, "mapped")
    meta.start_scrape(run, [[about["id"]]])
    meta.record_fetches(run, [FetchRecord(about["id"], "fetched", "", 200, 1, 10, None, None)])
    url_hash = hashlib.sha1((site.url + "/about").encode()).hexdigest()
    raw = b"# About us\n\nthe same article, new navigation around it\n"
    deps.blobs.put(run_content_key("demo.test", run, url_hash), content)
    deps.blobs.put(run_raw_key("demo.test", run, url_hash), raw)
    message = PagesFetched(run_id=run, site_domain="demo.test", batch_no=0, pages=(FetchedPage(
        document_id=about["id"], content_hash=v1["content_hash"], raw_hash=hashlib.sha1(raw).hexdigest(),
        content_key=run_content_key("demo.test", run, url_hash), raw_key=run_raw_key("demo.test", run, url_hash),
        fetch_status=200, fetch_time_ms=1, byte_size=len(raw)),))
    assert deliver(message, deps) == "done"
    assert meta.run_summary(run)["status"] == "finished"
    assert deps.metadata.document_by_url(site.url + "/about")["current_snapshot_id"] == v1["id"]
    assert first["status"] == "finished"
