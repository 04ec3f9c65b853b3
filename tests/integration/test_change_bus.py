"""Change events and delivery tasks on the real clients: `documents-changed` on the Pub/Sub emulator,
the notify queue through Cloud Tasks' REST transport (a loopback recorder, as in test_cloud_bus.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.bus.gcp import GcpBus
from gleaner.changes import outbox
from gleaner.changes.events import TOPIC
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.messages import DeliveryTask, decode
from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import Settings
from tests.cloud_fixtures import pull_all
from tests.conftest import test_settings
from tests.integration.test_cloud_bus import TasksRecorder, _topic_with_subscription, tasks_bus


@pytest.fixture
def recorder() -> Iterator[TasksRecorder]:
    r = TasksRecorder()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def test_a_crawls_change_events_reach_the_documents_changed_topic_as_the_events_json(
        make_deps, tmp_path, database_url, pubsub_host, pubsub_project):
    subscription = _topic_with_subscription(pubsub_host, pubsub_project, TOPIC)
    local = make_deps()
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        crawl(local, new_request(site.url + "/", site_domain="demo.test"))
    recorded = local.metadata.list_events()
    assert len(recorded) == 14  # 13 pages new, and the run's end (run.finished)
    # The same database, now published by the cloud bus: mark the events unpublished as a crash would.
    with local.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.document_events SET published_at = NULL"))
    gcp = GcpBus(Settings(bus="gcp", project=pubsub_project, pubsub_emulator_host=pubsub_host))
    cloud = Deps(test_settings(tmp_path, database_url), bus_override=gcp)
    assert outbox.flush(cloud) == 14
    assert outbox.flush(cloud) == 0  # published once marked: a second flush sends nothing
    got = pull_all(pubsub_host, subscription, expect=14)
    assert len(got) == 14
    by_id = {e.event_id: e.to_dict() for e in recorded}
    assert {json.loads(m.data)["event_id"]: json.loads(m.data) for m in got} == by_id
    assert sorted(m.attributes["type"] for m in got) == ["document.new"] * 13 + ["run.finished"]
    assert {m.attributes["event_id"] for m in got} == {e.event_id for e in recorded}
    assert {m.ordering_key for m in got} == {"demo.test"}
    cloud.close()
    gcp.close()


def test_a_delivery_becomes_one_named_task_to_the_scrape_functions_delivery_path(recorder):
    bus = tasks_bus(recorder)
    bus.settings = bus.settings.with_(notify_queue="gleaner-notify")
    delivery = "0d9c4f1e-0000-4000-8000-000000000042"
    assert bus.enqueue_delivery(delivery) is True
    assert bus.enqueue_delivery(delivery) is True  # already scheduled: still scheduled, not twice
    assert len(recorder.names) == 1
    path, body = recorder.requests[0]
    queue = "projects/proj/locations/europe-west1/queues/gleaner-notify"
    assert path == f"/v2/{queue}/tasks"
    assert body["task"]["name"] == f"{queue}/tasks/notify-{delivery}"
    http: dict[str, Any] = body["task"]["httpRequest"]
    assert http["url"] == "https://scrape-abc.a.run.app/notify/deliver"
    # Cloud Run accepts the service's URL as the token's audience, never a URL with a path.
    assert http["oidcToken"]["audience"] == "https://scrape-abc.a.run.app"
    assert decode(base64.b64decode(http["body"]), DeliveryTask) == DeliveryTask(delivery_id=delivery)


def test_a_digest_task_is_scheduled_for_the_end_of_its_period(recorder):
    from datetime import UTC, datetime

    bus = tasks_bus(recorder)
    bus.settings = bus.settings.with_(notify_queue="gleaner-notify")
    until = datetime(2026, 12, 2, tzinfo=UTC)
    assert bus.enqueue_delivery("0d9c4f1e-0000-4000-8000-000000000044", not_before=until) is True
    (_, body), = recorder.requests
    assert body["task"]["scheduleTime"] == "2026-12-02T00:00:00Z"  # Cloud Tasks holds it until then


def test_without_cloud_tasks_deliveries_stay_in_the_database_queue(recorder):
    bus = tasks_bus(recorder)
    bus.settings = bus.settings.with_(tasks_backend="pubsub")
    assert bus.enqueue_delivery("0d9c4f1e-0000-4000-8000-000000000043") is False
    bus.settings = bus.settings.with_(tasks_backend="cloudtasks", scrape_url=None)
    assert bus.enqueue_delivery("0d9c4f1e-0000-4000-8000-000000000043") is False
    assert recorder.requests == []


def test_with_a_notify_function_deliveries_go_to_it_not_to_the_scrape_function(recorder):
    bus = tasks_bus(recorder)
    bus.settings = bus.settings.with_(notify_queue="gleaner-notify", notify_task_url="https://notify-abc.a.run.app/")
    assert bus.enqueue_delivery("0d9c4f1e-0000-4000-8000-000000000044") is True
    http: dict[str, Any] = recorder.requests[0][1]["task"]["httpRequest"]
    assert http["url"] == "https://notify-abc.a.run.app/"
    assert http["oidcToken"]["audience"] == "https://notify-abc.a.run.app"
