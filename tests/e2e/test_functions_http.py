"""The deployed entry points under functions-framework's own app (``create_app(...).test_client()``).

Each function is loaded from ``functions/<stage>/main.py`` exactly as Cloud Functions loads it,
with its per-process Deps built from the environment, as deployed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from functions_framework import create_app

from gleaner import app as gleaner_app
from gleaner.messages import CrawlRequested, ScrapeBatch, decode, encode, run_id_for
from tests.cloud_fixtures import pull_all

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-token-0123456789abcdef0123456789abcdef"


def client(stage: str, target: str) -> Any:
    return create_app(target=target, source=str(ROOT / "functions" / stage / "main.py")).test_client()


@pytest.fixture
def function_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database_url: str) -> Iterator[dict[str, str]]:
    env = {"GLEANER_WEBHOOK_SECRET": SECRET, "GLEANER_DATABASE_URL": database_url,
           "GLEANER_HOME": str(tmp_path / "gleaner"), "GLEANER_WEBHOOK_MAX_BYTES": "2048"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    gleaner_app.reset_process_deps()
    yield env
    gleaner_app.reset_process_deps()


@pytest.fixture
def pubsub_env(function_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, pubsub_host: str,
               pubsub_project: str) -> str:
    """The map function publishing to the emulator; returns a pull subscription on crawl-requests."""
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports.grpc import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports.grpc import SubscriberGrpcTransport

    for name, value in {"GLEANER_BUS": "gcp", "GOOGLE_CLOUD_PROJECT": pubsub_project,
                        "PUBSUB_EMULATOR_HOST": pubsub_host}.items():
        monkeypatch.setenv(name, value)
    topic = f"projects/{pubsub_project}/topics/{CrawlRequested.topic}"
    pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=grpc.insecure_channel(pubsub_host))
                              ).create_topic(name=topic)
    subscription = f"projects/{pubsub_project}/subscriptions/probe"
    pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(pubsub_host))
                               ).create_subscription(name=subscription, topic=topic)
    return subscription


def post_crawl(body: Any, token: str | None = SECRET, headers: dict[str, str] | None = None) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    return client("map", "on_http").post("/", data=data, headers=all_headers)


def test_a_crawl_request_is_accepted_with_its_run_id_and_queued_on_crawl_requests(pubsub_env, pubsub_host):
    response = post_crawl({"url": "https://example.com/docs", "limit": 50, "include": ["/docs/**"],
                           "request_id": "req-1"})
    assert response.status_code == 202
    assert response.get_json() == {"run_id": run_id_for("req-1"), "request_id": "req-1",
                                   "site_domain": "example.com"}
    (message,) = pull_all(pubsub_host, pubsub_env, expect=1)
    queued = decode(message.data, CrawlRequested)
    assert (queued.target_url, queued.limit, queued.include) == ("https://example.com/docs", 50, ("/docs/**",))


def test_a_retried_cloud_scheduler_tick_maps_to_the_same_run(pubsub_env):
    headers = {"X-CloudScheduler-JobName": "crawl-example", "X-CloudScheduler-ScheduleTime": "2026-11-29T06:00:00Z"}
    first = post_crawl({"url": "https://example.com/"}, headers=headers).get_json()
    again = post_crawl({"url": "https://example.com/"}, headers=headers).get_json()
    other = post_crawl({"url": "https://example.com/"}).get_json()
    assert first["run_id"] == again["run_id"] != other["run_id"]


@pytest.mark.parametrize("token", [None, "wrong", SECRET + "x", ""])
def test_a_missing_or_wrong_bearer_is_refused(function_env, token):
    assert post_crawl({"url": "https://example.com/"}, token=token).status_code == 401


@pytest.mark.parametrize("body", [b"{not json", b"[]", {"limit": 3}, {"url": "ftp://example.com/"},
                                  {"url": "https://example.com/", "limit": 0},
                                  {"url": "https://example.com/", "include": "/docs/**"},
                                  {"url": "https://example.com/", "unknown": 1}])
def test_malformed_crawl_requests_are_answered_400(function_env, body):
    response = post_crawl(body)
    assert response.status_code == 400, response.get_data()
    assert "error" in response.get_json()


def test_an_oversized_body_is_answered_413(function_env):
    assert post_crawl({"url": "https://example.com/", "include": ["/x" * 2000]}).status_code == 413


def test_only_post_is_accepted_and_get_only_asks_for_a_run(function_env):
    assert client("map", "on_http").put("/").status_code == 405
    assert client("map", "on_http").get("/", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 400
    assert client("scrape", "on_http").get("/").status_code == 405


def test_a_malformed_task_is_answered_400_and_a_well_formed_one_for_an_unknown_run_200(function_env):
    scrape = client("scrape", "on_http")
    assert scrape.post("/", data=b'{"type": "Nope"}').status_code == 400
    batch = ScrapeBatch(run_id="8b0f6d6e-0000-4000-8000-000000000000", site_domain="example.com", batch_no=0)
    response = scrape.post("/", data=encode(batch))
    assert response.status_code == 200
    assert response.get_json() == {"outcome": "done"}


def test_a_malformed_pubsub_event_is_acknowledged_not_retried(function_env):
    event_headers = {"ce-id": "1", "ce-specversion": "1.0", "ce-source": "//pubsub.googleapis.com/x",
                     "ce-type": "google.cloud.pubsub.topic.v1.messagePublished", "Content-Type": "application/json"}
    sample = client("sample", "on_event")
    bad = {"message": {"data": base64.b64encode(b"not an envelope").decode(), "messageId": "1"}}
    assert sample.post("/", data=json.dumps(bad), headers=event_headers).status_code == 200
    wrong_type = {"message": {"data": base64.b64encode(encode(ScrapeBatch(run_id="r", site_domain="s",
                                                                          batch_no=0))).decode()}}
    assert sample.post("/", data=json.dumps(wrong_type), headers=event_headers).status_code == 200


def test_a_raw_pubsub_push_is_converted_to_the_same_cloud_event(function_env):
    """Push subscriptions deliver {"message", "subscription"}; functions-framework converts it."""
    push = {"subscription": "projects/p/subscriptions/s",
            "message": {"data": base64.b64encode(b"garbage").decode(), "messageId": "7", "attributes": {}}}
    assert client("snapshot", "on_event").post("/", json=push).status_code == 200


def test_the_feed_webhook_is_served_by_the_ingest_function(function_env):
    # The webhook's behaviour is covered in test_feed_webhook.py; here: it is wired and bearer-gated.
    ingest = client("ingest", "on_http")
    assert ingest.post("/", json={}).status_code == 401
    assert ingest.post("/", json={}, headers={"Authorization": f"Bearer {SECRET}"}).status_code == 202



def test_a_scheduler_tick_starts_each_due_site_once_however_often_it_is_delivered(pubsub_env, pubsub_host,
                                                                                   database_url, tmp_path):
    from gleaner.app import Deps
    from gleaner.operator.sites import add_site
    from gleaner.settings.config import Settings

    admin = Deps(Settings(database_url=database_url, data_dir=tmp_path / "admin"))
    try:
        add_site(admin, "https://example.com/docs", every="6h", exclude=["/docs/old/*"])
        add_site(admin, "https://example.org/", every="manual")
    finally:
        admin.close()
    first = post_crawl({"tick": True})
    again = post_crawl({"tick": True})
    assert first.status_code == again.status_code == 202
    assert [s["site_domain"] for s in first.get_json()["started"]] == ["example.com"]
    assert again.get_json()["started"] == []
    (message,) = pull_all(pubsub_host, pubsub_env, expect=2, timeout=5)
    queued = decode(message.data, CrawlRequested)
    assert (queued.target_url, queued.exclude, queued.triggered_by) == ("https://example.com/docs", ("/docs/old/*",),
                                                                        "cron")
    assert queued.run_id == first.get_json()["started"][0]["run_id"]


def test_the_scheduler_sweep_settles_a_run_whose_worker_went_silent_and_leaves_a_fresh_one(function_env,
                                                                                         database_url, tmp_path):
    import uuid

    import sqlalchemy as sa

    from gleaner import tenancy
    from gleaner.app import Deps
    from gleaner.settings.config import Settings

    admin = Deps(Settings(database_url=database_url, data_dir=tmp_path / "admin"))
    stuck, fresh = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        with tenancy.all_tenants():
            meta = admin.metadata
            host_id = meta.upsert_source_host("example.com", "example.com", True)
            for run_id in (stuck, fresh):
                # Another instance's worker: its liveness cannot be seen from here, only its silence.
                meta.create_run(run_id, "example.com", host_id, "https://example.com/", {}, "manual", "api",
                                worker="elsewhere:1:1")
            with meta.engine.begin() as conn:
                conn.execute(sa.text("UPDATE knowledge.crawl_runs SET status = 'scraping',"
                                     " heartbeat_at = now() - interval '2 hours' WHERE id = :r"), {"r": stuck})
        answer = post_crawl({"sweep": True})
        assert answer.status_code == 200, answer.get_data()
        assert [s["run_id"] for s in answer.get_json()["swept"]] == [stuck]
        with tenancy.all_tenants():
            # It had no page left to fetch, so the sweep finishes it (with pages left it would be interrupted).
            assert meta.run_status(stuck) == "finished"
            assert meta.run_status(fresh) == "mapping"
        assert post_crawl({"sweep": True}).get_json()["swept"] == []
    finally:
        admin.close()
