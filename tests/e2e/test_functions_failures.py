"""Failures that will not be retried again are recorded on the run and its URLs, once."""

from __future__ import annotations

from pathlib import Path

from werkzeug.test import EnvironBuilder

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.cloud import entry, taskentry
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.errors import RetryableError
from gleaner.fetch.fetcher import Fetcher
from gleaner.messages import CrawlMapped, CrawlRequested, Message, ScrapeBatch, encode
from gleaner.stages import dispatch
from tests.cloud_fixtures import cloud_event
from tests.conftest import test_settings

DEAD = {"CloudPubSubDeadLetterSourceSubscription": "crawl-mapped-sample",
        "CloudPubSubDeadLetterSourceDeliveryCount": "5"}


def _task(batch: ScrapeBatch, retries: int) -> object:
    return EnvironBuilder(method="POST", data=encode(batch),
                          headers={"X-CloudTasks-TaskRetryCount": str(retries)}).get_request()


def _sampled(deps: Deps, site: TestSite) -> tuple[CrawlRequested, list[Message]]:
    """Map and sample the demo site; the scrape batches sample scheduled."""
    request = CrawlRequested(request_id="fail-1", target_url=site.url + "/", site_domain="demo.test")
    bus = deps.bus
    assert isinstance(bus, LocalBus)
    scheduled: list[Message] = []
    dispatch(request, deps)
    bus.subscribe(CrawlMapped.topic, lambda m: dispatch(m, deps))
    bus.subscribe(ScrapeBatch.topic, scheduled.append)
    bus.drain()
    return request, scheduled


def test_a_scrape_task_that_keeps_failing_records_its_urls_on_the_last_attempt(tmp_path: Path, database_url):
    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        deps = Deps(test_settings(tmp_path / "ok", database_url), bus_override=LocalBus())
        request, (batch,) = _sampled(deps, site)

        def no_fetcher(_settings: object) -> Fetcher:  # every attempt fails retryably before any fetch
            raise RetryableError("the instance cannot reach the network")

        broken = Deps(test_settings(tmp_path / "x", database_url), bus_override=LocalBus(),
                      fetcher_factory=no_fetcher)
        assert isinstance(batch, ScrapeBatch)
        body, status, _ = taskentry.run_task(_task(batch, retries=0), ScrapeBatch, broken)
        assert status == 503  # Cloud Tasks retries
        assert deps.metadata.run_summary(request.run_id)["status"] == "scraping"
        last = broken.settings.max_delivery_attempts
        body, status, _ = taskentry.run_task(_task(batch, retries=last - 1), ScrapeBatch, broken)  # the last attempt
        assert status == 200 and '"gave-up"' in body
    summary = deps.metadata.run_summary(request.run_id)
    breakdown = deps.metadata.outcome_breakdown(request.run_id)
    assert summary["status"] == "finished" and summary["fetched"] == 0
    assert breakdown.get("unavailable") == summary["included"]
    deps.close()
    broken.close()


def test_a_blob_store_that_cannot_write_settles_the_batch_at_once_and_the_site_is_not_asked_again(
        tmp_path: Path, database_url):
    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        deps = Deps(test_settings(tmp_path / "ok", database_url), bus_override=LocalBus())
        request, (batch,) = _sampled(deps, site)
        # Blobs cannot be written: a file stands where their directory should be.
        (tmp_path / "broken").write_text("not a directory")
        broken = Deps(test_settings(tmp_path / "x", database_url, blob_url=f"file://{tmp_path / 'broken'}"),
                      bus_override=LocalBus())
        assert isinstance(batch, ScrapeBatch)
        before = len(site.log)
        _body, status, _ = taskentry.run_task(_task(batch, retries=0), ScrapeBatch, broken)
        assert status == 200  # settled: fetching again cannot fix the store
        fetched = len(site.log) - before
        _body, status, _ = taskentry.run_task(_task(batch, retries=1), ScrapeBatch, broken)  # delivered again anyway
        assert status == 200 and len(site.log) - before == fetched
    summary = deps.metadata.run_summary(request.run_id)
    breakdown = deps.metadata.outcome_breakdown(request.run_id)
    assert summary["status"] == "failed" and "blob store failed" in summary["error"]
    assert breakdown.get("store-failed") == 13  # every page a normal crawl stores (tests/e2e/test_cli.py)
    assert fetched <= summary["included"]  # one request per URL at most, however often the task came
    deps.close()
    broken.close()


def test_a_dead_lettered_message_fails_its_run_once_and_is_not_run_again(tmp_path: Path, database_url):
    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        deps = Deps(test_settings(tmp_path, database_url), bus_override=LocalBus())
        request = CrawlRequested(request_id="dead-1", target_url=site.url + "/", site_domain="demo.test")
        dispatch(request, deps)  # mapped; the sample message then dead-letters
        mapped = CrawlMapped(run_id=request.run_id, site_domain="demo.test")
        fetched_before = len(site.log)
        for _ in range(2):  # dead-letter topics may deliver twice
            assert entry.run_event(cloud_event(encode(mapped), DEAD), CrawlRequested, deps) == "dead-letter"
        assert len(site.log) == fetched_before  # recorded, not sampled
    summary = deps.metadata.run_summary(request.run_id)
    assert summary["status"] == "failed"
    assert "dead-lettered by crawl-mapped-sample after 5 deliveries" in summary["error"]
    deps.close()
