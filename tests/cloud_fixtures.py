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
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports.grpc import SubscriberGrpcTransport

    client = pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(host)))
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        response = client.pull(subscription=subscription, max_messages=100, timeout=5)
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
