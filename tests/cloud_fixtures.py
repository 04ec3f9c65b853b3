"""Fixtures for the cloud adapters: the real Pub/Sub emulator and a real GCS emulator.

Both are started once per session by the helpers of ``infra/emulators.py`` (the developer's
emulator mode) and killed at the end. Under ``CI=true`` an emulator that cannot start fails
the test loudly; elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import base64
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "infra"))

import emulators  # noqa: E402  (infra/ is not a package; its helpers serve the tests too)


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"emulator tests must run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def emulator_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulators")


@pytest.fixture(scope="session")
def pubsub_host(emulator_workdir: Path) -> Iterator[str]:
    try:
        proc = emulators.pubsub_emulator(emulator_workdir).start(timeout=90)
    except (RuntimeError, OSError) as exc:
        unavailable(f"the Pub/Sub emulator did not start: {exc}")
    try:
        yield f"127.0.0.1:{proc.port}"
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def gcs_url(emulator_workdir: Path) -> Iterator[str]:
    try:
        proc = emulators.gcs_emulator(emulator_workdir).start(timeout=30)
    except (RuntimeError, OSError, ImportError) as exc:
        unavailable(f"the GCS emulator did not start: {exc}")
    try:
        yield f"http://127.0.0.1:{proc.port}"
    finally:
        proc.stop()


@pytest.fixture
def gcs_bucket(gcs_url: str) -> str:
    """A fresh bucket on the GCS emulator."""
    name = "b-" + uuid.uuid4().hex[:12]
    emulators.create_bucket(gcs_url, name, "gleaner-test")
    return name


@pytest.fixture
def pubsub_project(pubsub_host: str) -> str:
    """A fresh project on the Pub/Sub emulator, so topics of different tests never mix."""
    return "p-" + uuid.uuid4().hex[:10]


def pull_all(host: str, subscription: str, expect: int, timeout: float = 20.0) -> list[Any]:
    """Pull (and ack) until `expect` messages arrived or the timeout passed."""
    import time

    import grpc
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports.grpc import SubscriberGrpcTransport

    client = pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(host)))
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and (left := deadline - time.monotonic()) > 0:
        try:
            # An empty subscription holds the pull open until its deadline: keep each one short.
            response = client.pull(subscription=subscription, max_messages=100, timeout=max(0.2, min(left, 2.0)))
        except gexc.DeadlineExceeded:
            continue
        if response.received_messages:
            client.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in response.received_messages])
            got.extend(m.message for m in response.received_messages)
    return got


def cloud_event(data: bytes, attributes: dict[str, str] | None = None, message_id: str = "1") -> Any:
    """A Pub/Sub CloudEvent shaped like Eventarc's (what on_event receives)."""
    from cloudevents.http import CloudEvent

    return CloudEvent(
        {"type": "google.cloud.pubsub.topic.v1.messagePublished", "source": "//pubsub.googleapis.com/test",
         "id": message_id},
        {"message": {"data": base64.b64encode(data).decode(), "attributes": attributes or {},
                     "messageId": message_id}, "subscription": "projects/p/subscriptions/s"},
    )


@pytest.fixture
def another_database(pg_server_url: str, pg_template: str) -> Iterator[Any]:
    """Factory for extra fresh, migrated databases in one test (to compare two crawls)."""
    import sqlalchemy as sa

    from tests.conftest import TEMPLATE_DB, _admin_engine, _with_database

    admin = _admin_engine(pg_server_url)
    made: list[str] = []

    def make() -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}"))
        made.append(name)
        return _with_database(pg_server_url, name)

    yield make
    with admin.connect() as conn:
        for name in made:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def crawl_state(engine: Any, blobs: Any, run_id: str) -> dict[str, Any]:
    """Everything a user could observe about a run, with generated ids replaced by URLs.

    Two crawls of the same site with the same request id compare equal iff they produced the
    same documents, ledger, snapshots, versions, canonical texts, spans, counters, blobs and change events.
    """
    import sqlalchemy as sa

    with engine.connect() as conn:
        doc_url = {str(i): u for i, u in conn.execute(sa.text("SELECT id, canonical_url FROM knowledge.documents"))}
        run = conn.execute(sa.text(
            "SELECT status::text, urls_discovered, urls_included, urls_excluded, urls_scraped, urls_not_modified,"
            " urls_failed, snapshots_new, snapshots_changed, snapshots_unchanged, finished_at IS NOT NULL, error,"
            " batches_total FROM knowledge.crawl_runs WHERE id = :r"), {"r": run_id}).one()
        runs = conn.execute(sa.text("SELECT count(*) FROM knowledge.crawl_runs")).scalar()
        ledger = sorted(tuple(map(str, r)) for r in conn.execute(sa.text(
            "SELECT d.canonical_url, c.decision, c.fetch_outcome, c.snapshot_outcome, c.batch_no"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id")))
        documents = sorted(tuple(map(str, r)) for r in conn.execute(sa.text(
            "SELECT d.canonical_url, d.status, d.scrape_policy, s.version, s.content_hash"
            " FROM knowledge.documents d LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id")))
        snapshots = sorted(tuple(map(str, r)) for r in conn.execute(sa.text(
            "SELECT d.canonical_url, s.version, s.content_hash, s.change_signal FROM knowledge.document_snapshots s"
            " JOIN knowledge.documents d ON d.id = s.document_id")))
        counts = {table: conn.execute(sa.text(f"SELECT count(*) FROM knowledge.{table}")).scalar()
                  for table in ("documents", "document_snapshots", "canonical_texts", "text_spans",
                                "snapshot_texts", "crawl_page_decisions", "source_hosts")}
        events = sorted(tuple(map(str, r)) for r in conn.execute(sa.text(
            "SELECT url, type::text, version, previous_version, published_at IS NOT NULL"
            " FROM knowledge.document_events")))
        spans = conn.execute(sa.text("SELECT md5(string_agg(text_hash || ordinal || span_start || span_end || kind,"
                                     " ',' ORDER BY text_hash, ordinal)) FROM knowledge.text_spans")).scalar()
    import hashlib

    blob_digest = {}
    for key in blobs.list("domains/"):
        named = key
        for doc_id, url in doc_url.items():
            named = named.replace(doc_id, url.replace("/", "|"))
        body = blobs.get(key)
        if "/answers/" in key:  # a walk's kept answer records how long its fetch took: the rest must match
            import json

            body = json.dumps({k: v for k, v in json.loads(body).items() if k != "elapsed_ms"}, sort_keys=True).encode()
        blob_digest[named] = hashlib.sha1(body).hexdigest()
    return {"run": tuple(run), "runs": runs, "ledger": ledger, "documents": documents, "snapshots": snapshots,
            "counts": counts, "spans": spans, "blobs": blob_digest, "events": events}
