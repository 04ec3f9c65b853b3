"""A whole crawl through the real messaging path: functions under functions-framework (subprocesses),
Pub/Sub emulator push subscriptions, fake-gcs-server, PostgreSQL.

The crawl request goes to the map function's HTTP endpoint; from there every hop is a Pub/Sub push
(scrape batches ride the ``scrape`` topic unwrapped, standing in for Cloud Tasks, which has no
emulator). The result must equal the in-process crawl's. Then: duplicates through Pub/Sub change
nothing, a transient failure is redelivered until it succeeds, a poison message is dead-lettered
and its failure recorded on the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.bus.gcp import GcpBus
from gleaner.bus.local import LocalBus
from gleaner.changes.events import TOPIC as CHANGES_TOPIC
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.messages import CrawlRequested, FetchedPage, Message, PagesFetched, decode
from gleaner.runtime.runner import crawl
from gleaner.settings.config import Settings
from gleaner.store.backends import db
from gleaner.store.backends.gcsblobs import GcsBlobStore
from gleaner.store.metadata import MetadataStore
from tests.cloud_fixtures import crawl_state, emulators, pull_all
from tests.conftest import test_settings

SITE_ENV = {"GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": "0", "GLEANER_HOST_CONCURRENCY": "4",
            "GLEANER_EXTRACT_WORKERS": "1", "GLEANER_FETCH_TIMEOUT": "5",
            # A page's render budget is an upper bound (a settled page ends early); under a full test run the
            # render service's cold Chromium and the page's script share two busy cores.
            "GLEANER_RENDER_SECONDS": "40"}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Cloud:
    """The running stack plus the handles a test needs to look at it."""

    def __init__(self, stack: emulators.Stack, database_url: str, gcs_url: str) -> None:
        self.stack = stack
        self.engine = db.create_engine(Settings(database_url=database_url))
        self.meta = MetadataStore(self.engine)
        settings = Settings(bus="gcp", project=stack.project, pubsub_emulator_host=stack.env["PUBSUB_EMULATOR_HOST"],
                            storage_emulator_host=gcs_url, tasks_backend="pubsub")
        self.blobs = GcsBlobStore.from_url(f"gs://{stack.bucket}", settings)
        self.bus = GcpBus(settings)

    def log(self, stage: str, entry: str = "on_event") -> str:
        return (self.stack.workdir / f"fn-{stage}-{entry}.log").read_text(errors="replace")

    def deliveries(self) -> int:
        """Every delivery any function finished (handled, acknowledged or failed), from their logs."""
        total = 0
        for stage, entry in self.stack.urls:
            text = self.log(stage, entry)
            total += sum(text.count(w) for w in ("handled ", "acknowledging ", "will be redelivered",
                                                  "recorded dead letter"))
        return total

    def post_crawl(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.stack.urls[("map", "on_http")], data=json.dumps(body).encode(),
                                         method="POST", headers={"Authorization": f"Bearer {self.stack.webhook_secret}",
                                                                 "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 202
            return dict(json.loads(response.read()))

    def run_settled(self, run_id: str) -> dict[str, Any] | None:
        """The run summary once the run ended and every snapshot it wrote was ingested."""
        summary = self.meta.run_summary(run_id)
        if summary is None or summary["status"] not in ("finished", "partial", "failed"):
            return None
        with self.engine.connect() as conn:
            pending = conn.execute(sa.text(
                "SELECT count(*) FROM knowledge.document_snapshots s LEFT JOIN knowledge.snapshot_texts t"
                " ON t.snapshot_id = s.id WHERE s.produced_by_run_id = :r AND t.snapshot_id IS NULL"),
                {"r": run_id}).scalar()
        return summary if pending == 0 else None


@pytest.fixture(scope="module")
def cloud(pubsub_host: str, gcs_url: str, pg_server_url: str, pg_template: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    from tests.conftest import TEMPLATE_DB, _admin_engine, _with_database

    name = "t_" + uuid.uuid4().hex[:12]
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}"))
    database_url = _with_database(pg_server_url, name)
    workdir = tmp_path_factory.mktemp("stack")
    suffix = uuid.uuid4().hex[:8]
    stack = emulators.Stack(workdir, database_url, project=f"p-{suffix}", bucket=f"b-{suffix}",
                            extra_env={**SITE_ENV, "GLEANER_HOME": str(workdir / "data")},
                            min_backoff=0.2, max_backoff=1.0, ack_deadline=10)
    cloud = None
    try:
        stack.use_emulators(pubsub_host, gcs_url)
        # Taps: pull subscriptions that see a copy of every message of every topic.
        import grpc
        from google.cloud import pubsub_v1
        from google.pubsub_v1.services.subscriber.transports.grpc import SubscriberGrpcTransport

        emulators.declare(stack.project, pubsub_host, {})
        subscriber = pubsub_v1.SubscriberClient(
            transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(pubsub_host)))
        for topic in emulators.topics():
            subscriber.create_subscription(name=f"projects/{stack.project}/subscriptions/{topic}-tap",
                                           topic=f"projects/{stack.project}/topics/{topic}")
        # As an earlier in-process functions-framework app leaves them in a full run (CI met it: the render
        # service, whose handler is undecorated, then answered as a CloudEvent function): the stack must not
        # hand them on.
        with mock.patch.dict(os.environ, {"FUNCTION_SIGNATURE_TYPE": "cloudevent", "FUNCTION_TARGET": "on_event"}):
            stack.start_functions()
        cloud = Cloud(stack, database_url, gcs_url)
        yield cloud
    finally:
        stack.stop()
        if cloud is not None:
            cloud.bus.close()
            cloud.engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.fixture(scope="module")
def crawled(cloud: Cloud) -> Iterator[tuple[CrawlRequested, TestSite, dict[str, Any]]]:
    """One crawl of the demo site through the functions; the site stays up for the module."""
    pages: dict = {}
    with TestSite(pages, max_seconds=300) as site:
        pages.update(demo_pages(site.url))
        request_id = "e2e-" + uuid.uuid4().hex[:8]
        accepted = cloud.post_crawl({"url": site.url + "/", "site_domain": "demo.test", "request_id": request_id})
        request = CrawlRequested(request_id=request_id, target_url=site.url + "/", site_domain="demo.test")
        assert accepted["run_id"] == request.run_id
        summary = wait_for(lambda: cloud.run_settled(request.run_id), 120, "the crawl to settle")
        yield request, site, summary


def test_a_crawl_through_pubsub_push_equals_the_in_process_crawl(cloud, crawled, tmp_path, another_database):
    request, _site, summary = crawled
    assert summary["status"] == "finished" and summary["snapshots"]["new"] > 10
    through_cloud = crawl_state(cloud.engine, cloud.blobs, request.run_id)
    local = Deps(test_settings(tmp_path, another_database()), bus_override=LocalBus())
    crawl(local, request)
    in_process = crawl_state(local.engine, local.blobs, request.run_id)
    local.close()
    assert through_cloud == in_process
    # Bodies went to the bucket, through the real client, at the ADR's keys.
    assert any(k.endswith("/content.md") and "/document-snapshots/" in k for k in cloud.blobs.list("domains/"))


def test_every_message_published_twice_more_changes_nothing(cloud, crawled):
    request, _site, _summary = crawled
    before = crawl_state(cloud.engine, cloud.blobs, request.run_id)
    finished_at = cloud.meta.run_summary(request.run_id)["finished_at"]
    host = cloud.stack.env["PUBSUB_EMULATOR_HOST"]
    tapped: list[Message] = []
    for topic in emulators.topics():
        if topic == CHANGES_TOPIC:
            continue  # change events are the events' JSON, not stage messages (below)
        subscription = f"projects/{cloud.stack.project}/subscriptions/{topic}-tap"
        tapped += [decode(m.data) for m in pull_all(host, subscription, expect=10_000, timeout=1.5)]
    changes = f"projects/{cloud.stack.project}/subscriptions/{CHANGES_TOPIC}-tap"
    announced = [json.loads(m.data) for m in pull_all(host, changes, expect=10_000, timeout=1.5)]
    assert len({e["event_id"] for e in announced}) == len(before["events"]) > 10
    kinds = {type(m).__name__ for m in tapped}
    assert kinds == {"CrawlRequested", "CrawlMapped", "ScrapeBatch", "PagesFetched", "SnapshotsWritten"}
    start = cloud.deliveries()
    for message in tapped + tapped:
        cloud.bus.publish(message, ordering_key=request.site_domain)
    wait_for(lambda: cloud.deliveries() >= start + 2 * len(tapped), 60, "the duplicates to be delivered")
    stable = [cloud.deliveries()]

    def quiet() -> bool:  # nothing delivered for a second: the duplicates' re-emissions are done too
        time.sleep(1.0)
        stable.append(cloud.deliveries())
        return stable[-1] == stable[-2]

    wait_for(quiet, 60, "deliveries to stop")
    assert crawl_state(cloud.engine, cloud.blobs, request.run_id) == before
    assert pull_all(host, changes, expect=1, timeout=1.5) == []  # the duplicates announced no change
    assert cloud.meta.run_summary(request.run_id)["finished_at"] == finished_at


def _run_waiting_for_snapshot(cloud: Cloud, site_url: str) -> tuple[str, str, str]:
    """A run in `scraping` with one fetched page whose snapshot has not been written: (run, doc, url hash)."""
    run_id = str(uuid.uuid4())
    host_id = cloud.meta.upsert_source_host("flaky.test", "127.0.0.1", own_site=True)
    cloud.meta.create_run(run_id, "flaky.test", host_id, site_url, {}, "website_mapping", "api")
    url = f"{site_url}/flaky/{run_id}"
    url_hash = hashlib.sha1(url.encode()).hexdigest()
    (doc_id,) = cloud.meta.upsert_documents("flaky.test", host_id, [(url, url_hash, f"/flaky/{run_id}", url)]).values()
    cloud.meta.add_run_pages(run_id, [(doc_id, 0, "start")])
    from gleaner.store.metadata import Decision, FetchRecord

    cloud.meta.record_decisions(run_id, [Decision(doc_id, "include", "system", "test", 1.0, {})])
    cloud.meta.set_run_status(run_id, "mapped")
    assert cloud.meta.start_scrape(run_id, [[doc_id]])
    cloud.meta.record_fetches(run_id, [FetchRecord(doc_id, "fetched", "", 200, 1, 10, None, None)])
    return run_id, doc_id, url_hash


def _pages_fetched(run_id: str, doc_id: str, url_hash: str, body: bytes) -> PagesFetched:
    digest = hashlib.sha1(body).hexdigest()
    key = f"domains/flaky.test/runs/{run_id}/content/{url_hash}.md"
    return PagesFetched(run_id=run_id, site_domain="flaky.test", batch_no=0, pages=(FetchedPage(
        document_id=doc_id, content_hash=digest, raw_hash=digest, content_key=key, raw_key=None, fetch_status=200,
        fetch_time_ms=1, byte_size=len(body)),))


def test_a_transient_failure_is_redelivered_until_it_succeeds(cloud, crawled):
    _request, site, _summary = crawled
    run_id, doc_id, url_hash = _run_waiting_for_snapshot(cloud, site.url)
    body = b"# Flaky\n\nThe body arrives late.\n"
    message = _pages_fetched(run_id, doc_id, url_hash, body)
    cloud.bus.publish(message, ordering_key="flaky.test")
    # The first delivery finds no body and fails; the function answers 500 and Pub/Sub retries.
    wait_for(lambda: f"PagesFetched run={run_id} failed" in cloud.log("snapshot"), 30, "a failed delivery")
    cloud.blobs.put(message.pages[0].content_key or "", body)
    # The emulator redelivers a failed push once the ack deadline (10 s here) has passed.
    summary = wait_for(lambda: cloud.run_settled(run_id), 40, "the redelivery to succeed")
    assert summary["status"] == "finished" and summary["snapshots"]["new"] == 1
    assert "recorded dead letter PagesFetched run=" + run_id not in cloud.log("map")


def test_a_poison_message_is_dead_lettered_and_its_run_records_the_failure(cloud, crawled):
    _request, site, _summary = crawled
    run_id, doc_id, url_hash = _run_waiting_for_snapshot(cloud, site.url)
    cloud.bus.publish(_pages_fetched(run_id, doc_id, url_hash, b"never written"), ordering_key="flaky.test")
    summary = wait_for(lambda: (s := cloud.meta.run_summary(run_id)) and s["status"] == "partial" and s,
                       120, "the dead letter to be recorded")
    assert "dead-lettered" in summary["error"] and "after 5 deliveries" in summary["error"]
    assert cloud.log("snapshot").count(f"PagesFetched run={run_id} failed") == 5
    assert not cloud.blobs.list(f"domains/flaky.test/document-snapshots/{doc_id}/")


def test_the_stack_serves_every_entry_point_of_functions_dir(cloud):
    assert set(cloud.stack.urls) == {(s, e) for s, entries in emulators.entry_points().items() for e in entries}


def test_render_auto_on_the_emulator_path_renders_the_spa_section_through_the_render_service(cloud):
    from tests.render_site import render_site

    assert cloud.stack.render_url is not None
    with render_site() as site:
        accepted = cloud.post_crawl({"url": site.url + "/", "site_domain": "spa.test", "render": "auto",
                                     "request_id": "render-" + uuid.uuid4().hex[:8]})
        summary = wait_for(lambda: cloud.run_settled(accepted["run_id"]), 180, "the rendered crawl to settle")
    assert summary["status"] == "finished", summary
    with cloud.engine.connect() as conn:
        modes = dict(conn.execute(sa.text(
            "SELECT d.path, s.render_mode::text FROM knowledge.documents d JOIN knowledge.document_snapshots s"
            " ON s.id = d.current_snapshot_id WHERE d.site_domain = 'spa.test'")).all())
    logs = "\n".join(f"--- {log.name}\n" + log.read_text()[-3000:]
                     for log in sorted(cloud.stack.workdir.glob("fn-*.log"))
                     if "render" in log.name or "sample" in log.name)
    # /app/linked-only-by-script: a link only the rendered sample's DOM holds (stages/foundlinks.py).
    assert modes == {"/app/one": "browser", "/app/two": "browser", "/app/linked-only-by-script": "browser",
                     "/docs/one": "plain_fetch", "/docs/two": "plain_fetch"}, logs
    assert "rendered " in (cloud.stack.workdir / "fn-render-on_http.log").read_text()  # the service did it
