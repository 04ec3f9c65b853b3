"""The bus adapters against real clients: Pub/Sub on its emulator, Cloud Tasks through its REST transport.

Cloud Tasks has no emulator: the real ``CloudTasksClient`` (REST transport) talks to a small
loopback server that records the CreateTask requests and answers like the service (409
ALREADY_EXISTS for a name already used), so the test sees exactly what would be sent.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gleaner.bus.gcp import GcpBus
from gleaner.bus.local import LocalBus
from gleaner.errors import ConfigError
from gleaner.messages import CrawlMapped, ScrapeBatch, decode, encode
from gleaner.settings.config import Settings
from tests.cloud_fixtures import emulators, pull_all

BATCH = ScrapeBatch(run_id="6f1c0e1e-0000-4000-8000-000000000001", site_domain="example.com", batch_no=3,
                    document_ids=("d1", "d2"))


class TasksRecorder:
    """A loopback stand-in for cloudtasks.googleapis.com's CreateTask and DeleteTask, recording each
    request; deleting a task that does not exist (any more) answers 404 NOT_FOUND, as the service does."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.names: set[str] = set()
        self.deletes: list[str] = []
        self.deleted: set[str] = set()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.requests.append((self.path.split("?", 1)[0], body))
                name = body["task"]["name"]
                if name in recorder.names:
                    status, answer = 409, {"error": {"code": 409, "status": "ALREADY_EXISTS",
                                                     "message": "Requested entity already exists"}}
                else:
                    recorder.names.add(name)
                    status, answer = 200, {**body["task"], "createTime": "2026-11-29T00:00:00Z"}
                self._answer(status, answer)

            def do_DELETE(self) -> None:
                path = self.path.split("?", 1)[0]
                recorder.deletes.append(path)
                name = path.removeprefix("/v2/")
                if name in recorder.names - recorder.deleted:
                    recorder.deleted.add(name)
                    self._answer(200, {})
                else:
                    self._answer(404, {"error": {"code": 404, "status": "NOT_FOUND",
                                                 "message": "The task no longer exists"}})

            def _answer(self, status: int, answer: dict[str, Any]) -> None:
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def tasks_recorder() -> Iterator[TasksRecorder]:
    recorder = TasksRecorder()
    recorder.thread.start()
    yield recorder
    recorder.server.shutdown()
    recorder.server.server_close()


def tasks_bus(recorder: TasksRecorder) -> GcpBus:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import tasks_v2

    client = tasks_v2.CloudTasksClient(transport="rest", credentials=AnonymousCredentials(),
                                       client_options={"api_endpoint": recorder.url})
    settings = Settings(bus="gcp", project="proj", region="europe-west1", tasks_queue="gleaner-scrape",
                        scrape_url="https://scrape-abc.a.run.app/",
                        tasks_service_account="gleaner-tasks@proj.iam.gserviceaccount.com")
    return GcpBus(settings, tasks_client=client)


def test_a_scrape_batch_becomes_a_named_http_task_with_an_oidc_token(tasks_recorder):
    assert tasks_bus(tasks_recorder).enqueue(BATCH) is True
    path, body = tasks_recorder.requests[0]
    queue = "projects/proj/locations/europe-west1/queues/gleaner-scrape"
    assert path == f"/v2/{queue}/tasks"
    task = body["task"]
    assert task["name"] == f"{queue}/tasks/{BATCH.run_id}-3"
    http = task["httpRequest"]
    from google.cloud import tasks_v2

    # The REST transport sends enums as integers ($alt=json;enum-encoding=int).
    assert http["url"] == "https://scrape-abc.a.run.app/" and http["httpMethod"] == tasks_v2.HttpMethod.POST
    assert http["oidcToken"] == {"serviceAccountEmail": "gleaner-tasks@proj.iam.gserviceaccount.com",
                                 "audience": "https://scrape-abc.a.run.app/"}
    assert decode(base64.b64decode(http["body"]), ScrapeBatch) == BATCH
    assert task["dispatchDeadline"] == "1800s"


def test_a_resent_batch_is_not_scheduled_twice(tasks_recorder):
    bus = tasks_bus(tasks_recorder)
    assert bus.enqueue(BATCH) is True
    assert bus.enqueue(BATCH) is False
    assert len(tasks_recorder.names) == 1


def test_the_in_process_bus_keeps_the_same_task_name_contract():
    bus = LocalBus()
    assert bus.enqueue(BATCH) is True
    assert bus.enqueue(BATCH) is False


def test_without_a_scrape_url_enqueue_is_a_configuration_error(tasks_recorder):
    bus = tasks_bus(tasks_recorder)
    bus.settings = bus.settings.with_(scrape_url=None)
    with pytest.raises(ConfigError):
        bus.enqueue(BATCH)


def _topic_with_subscription(host: str, project: str, topic: str) -> str:
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports.grpc import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports.grpc import SubscriberGrpcTransport

    pub = pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=grpc.insecure_channel(host)))
    sub = pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(host)))
    pub.create_topic(name=f"projects/{project}/topics/{topic}")
    name = f"projects/{project}/subscriptions/{topic}-probe"
    sub.create_subscription(request={"name": name, "topic": f"projects/{project}/topics/{topic}",
                                     "enable_message_ordering": True})
    return name


def test_published_messages_reach_the_topic_encoded_with_the_site_as_ordering_key(pubsub_host, pubsub_project):
    subscription = _topic_with_subscription(pubsub_host, pubsub_project, CrawlMapped.topic)
    bus = GcpBus(Settings(bus="gcp", project=pubsub_project, pubsub_emulator_host=pubsub_host))
    sent = [CrawlMapped(run_id=f"run-{n}", site_domain="example.com") for n in range(5)]
    for message in sent:
        bus.publish(message, ordering_key="example.com")
    got = pull_all(pubsub_host, subscription, expect=5)
    assert [decode(m.data) for m in got] == sent  # one ordering key: delivered in publish order
    assert {m.ordering_key for m in got} == {"example.com"}
    assert {m.attributes["type"] for m in got} == {"CrawlMapped"}
    bus.close()


def test_in_emulator_mode_scrape_batches_travel_on_the_scrape_topic_with_the_task_body(pubsub_host, pubsub_project):
    subscription = _topic_with_subscription(pubsub_host, pubsub_project, ScrapeBatch.topic)
    bus = GcpBus(Settings(bus="gcp", project=pubsub_project, pubsub_emulator_host=pubsub_host,
                          tasks_backend="pubsub"))
    assert bus.enqueue(BATCH) is True
    (message,) = pull_all(pubsub_host, subscription, expect=1)
    assert message.data == encode(BATCH)
    bus.close()


def test_publishing_to_a_topic_that_does_not_exist_is_a_configuration_error(pubsub_host, pubsub_project):
    bus = GcpBus(Settings(bus="gcp", project=pubsub_project, pubsub_emulator_host=pubsub_host))
    with pytest.raises(ConfigError):
        bus.publish(CrawlMapped(run_id="r", site_domain="example.com"), ordering_key="example.com")
    bus.close()


def test_the_deployment_topology_declares_a_push_route_for_every_consumed_topic():
    from gleaner.stages import STAGES

    routes = {r.topic: r for r in emulators.push_routes()}
    assert set(STAGES) <= set(routes)
    assert routes[ScrapeBatch.topic].entry_point == "on_http" and routes[ScrapeBatch.topic].unwrapped


# -- one contract for every Bus ------------------------------------------------------------------


@pytest.fixture(params=["local", "pubsub"])
def bus_and_inbox(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """(bus, inbox): inbox(n) returns the first n messages delivered to the topic's consumer."""
    if request.param == "local":
        bus = LocalBus()
        seen: list[Any] = []
        bus.subscribe(CrawlMapped.topic, seen.append)

        def local_inbox(n: int) -> list[Any]:
            bus.drain()
            return seen[:n]

        yield bus, local_inbox
        return
    host, project = request.getfixturevalue("pubsub_host"), request.getfixturevalue("pubsub_project")
    subscription = _topic_with_subscription(host, project, CrawlMapped.topic)
    gcp = GcpBus(Settings(bus="gcp", project=project, pubsub_emulator_host=host))
    yield gcp, lambda n: [decode(m.data) for m in pull_all(host, subscription, expect=n)]
    gcp.close()


def test_a_published_message_reaches_its_topic_as_it_was_sent(bus_and_inbox):
    bus, inbox = bus_and_inbox
    message = CrawlMapped(run_id="6f1c0e1e-0000-4000-8000-0000000000aa", site_domain="example.com")
    bus.publish(message, ordering_key="example.com")
    assert inbox(1) == [message]


def test_a_deferred_batch_is_a_new_named_task_scheduled_for_later(tasks_recorder):
    import time
    from dataclasses import replace

    bus = tasks_bus(tasks_recorder)
    later = replace(BATCH, deferrals=2)
    before = time.time()
    assert bus.defer(later, 30.0) is True
    assert bus.defer(later, 30.0) is False  # a redelivered task defers its batch once
    task = tasks_recorder.requests[0][1]["task"]
    assert task["name"].endswith(f"/tasks/{BATCH.run_id}-3-d2")
    from datetime import datetime

    at = datetime.fromisoformat(task["scheduleTime"].replace("Z", "+00:00")).timestamp()
    assert before + 29 <= at <= time.time() + 31


def test_a_deferred_task_no_longer_needed_is_deleted_and_one_already_gone_is_no_error(tasks_recorder):
    from dataclasses import replace

    bus = tasks_bus(tasks_recorder)
    later = replace(BATCH, deferrals=1, queued=True)
    assert bus.defer(later, 60.0) is True
    assert bus.cancel(later.task_name) is True
    queue = "projects/proj/locations/europe-west1/queues/gleaner-scrape"
    assert tasks_recorder.deletes == [f"/v2/{queue}/tasks/{BATCH.run_id}-3-d1"]
    # Deleted already, or run and gone: Cloud Tasks answers NOT_FOUND, which is what was wanted.
    assert bus.cancel(later.task_name) is False
    assert bus.cancel(replace(BATCH, deferrals=7).task_name) is False


def test_in_emulator_mode_a_cancelled_deferred_batch_is_never_published(pubsub_host, pubsub_project):
    from dataclasses import replace

    subscription = _topic_with_subscription(pubsub_host, pubsub_project, ScrapeBatch.topic)
    bus = GcpBus(Settings(bus="gcp", project=pubsub_project, pubsub_emulator_host=pubsub_host,
                          tasks_backend="pubsub"))
    dropped, kept = replace(BATCH, deferrals=1), replace(BATCH, batch_no=4, deferrals=1)
    assert bus.defer(dropped, 0.5) is True and bus.defer(kept, 0.5) is True
    assert bus.cancel(dropped.task_name) is True
    assert bus.cancel(dropped.task_name) is False  # once gone, gone
    got = pull_all(pubsub_host, subscription, expect=2, timeout=4.0)  # waits out both timers
    assert [decode(m.data) for m in got] == [kept]
    assert bus.cancel(kept.task_name) is False  # published already: nothing left to stop
    bus.close()
