"""Signed webhooks: a receiver on 127.0.0.1 verifies every delivery with the Standard Webhooks reference
implementation (the ``standardwebhooks`` package), answers what the test scripts, and records what came.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from standardwebhooks import Webhook, WebhookVerificationError
from werkzeug.test import EnvironBuilder

from gleaner.cli import main
from gleaner.cloud import taskentry
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.messages import DeliveryTask, encode
from gleaner.runtime.runner import crawl, new_request

SITE = "demo.test"


class Receiver:
    """A webhook receiver: answers ``script`` in turn (then 200), verifies signatures once it knows the
    secret, and stops by itself after ``max_requests`` requests or ``max_seconds``."""

    def __init__(self, script: list[int] | None = None, max_requests: int = 200, max_seconds: float = 120) -> None:
        self.script = list(script or [])
        self.secret: str | None = None
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.max_requests = max_requests
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    verified = None
                    if receiver.secret is not None:
                        try:
                            Webhook(receiver.secret).verify(raw, headers)
                            verified = True
                        except WebhookVerificationError:
                            verified = False
                    answer = receiver.script.pop(0) if receiver.script else 200
                    receiver.received.append({"id": headers.get("webhook-id"), "verified": verified,
                                              "body": json.loads(raw), "answer": answer, "headers": headers})
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.deadline = time.monotonic() + max_seconds
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.server.timeout = 0.2
        while time.monotonic() < self.deadline and len(self.received) < self.max_requests:
            self.server.handle_request()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/gleaner"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.deadline = 0
    r.thread.join(timeout=5)
    r.server.server_close()


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner"),
            "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_NOTIFY_RETRY_SECONDS": "0.1"}


def gleaner(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def subscribe(env: dict[str, str], url: str, *options: str) -> tuple[str, str]:
    added = gleaner(env, "notify", "add", url, *options)
    assert added.exit_code == 0, added.output
    fields = dict(line.split(None, 1) for line in added.stdout.splitlines())
    return fields["id"], fields["secret"]


def test_a_change_is_delivered_signed_and_a_500_is_retried_with_the_same_webhook_id(make_deps, env, receiver):
    deps = make_deps(notify_retry_seconds=0.1, notify_run_wait=10.0)
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        # Subscribed after the first crawl: its 13 document.new events are not sent to it.
        sub_id, secret = subscribe(env, receiver.url, "--site", SITE)
        assert secret.startswith("whsec_") and len(secret) >= len("whsec_") + 32
        receiver.secret = secret
        receiver.script = [500]
        pages.update(demo_pages(site.url, changed=("/about",)))
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))  # delivers before it returns
    assert [r["answer"] for r in receiver.received] == [500, 200]
    first, second = receiver.received
    assert first["id"] == second["id"] and all(r["verified"] for r in receiver.received)
    assert first["body"] == second["body"]  # every attempt sends the same bytes
    body = first["body"]
    assert list(body) == ["type", "timestamp", "data"] and body["type"] == "document.changed"
    event = body["data"]
    assert (event["event_id"], event["url"], event["run_id"], event["version"], event["previous_version"]) == (
        first["id"], site.url + "/about", summary["run_id"], 2, 1)

    log = json.loads(gleaner(env, "notify", "deliveries", sub_id, "--json").stdout)
    assert [(d["state"], d["event_id"], [a["status"] for a in d["log"]]) for d in log] == [
        ("delivered", first["id"], [500, 200])]
    listed = json.loads(gleaner(env, "notify", "list", "--json").stdout)
    assert [(s["id"], s["url"], s["site"]) for s in listed] == [(sub_id, receiver.url, SITE)]
    assert "secret" not in listed[0]


def test_deliver_sends_what_the_run_left_pending_and_retries_what_is_due(make_deps, env, receiver):
    deps = make_deps(notify_retry_seconds=0.1)  # the default: the run does not wait for its subscribers
    _, secret = subscribe(env, receiver.url, "--types", "document.new")
    receiver.secret = secret
    receiver.script = [503] * 13  # every first attempt of the crawl's 13 new pages fails
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert receiver.received == [] and summary["notifications_pending"] == 13
    pending = json.loads(gleaner(env, "notify", "deliveries", "--json").stdout)
    assert {d["state"] for d in pending} == {"pending"}
    first = gleaner(env, "deliver")
    assert first.exit_code == 0 and "13 retry" in first.stdout, first.output
    assert len(receiver.received) == 13 and {r["answer"] for r in receiver.received} == {503}
    time.sleep(0.2)
    delivered = gleaner(env, "deliver")
    assert delivered.exit_code == 0 and "13 delivered" in delivered.stdout, delivered.output
    ids = [r["id"] for r in receiver.received]
    assert len(ids) == 26 and sorted(ids[:13]) == sorted(ids[13:])  # each event's id, twice
    assert all(r["verified"] for r in receiver.received)
    again = gleaner(env, "deliver")
    assert "nothing due" in again.stdout and len(receiver.received) == 26


def test_notify_test_sends_a_signed_message_now_and_removed_subscriptions_get_nothing(make_deps, env, receiver):
    sub_id, secret = subscribe(env, receiver.url)
    receiver.secret = secret
    tested = gleaner(env, "notify", "test", sub_id)
    assert tested.exit_code == 0 and tested.stdout.startswith("delivered: HTTP 200")
    (message,) = receiver.received
    assert message["verified"] and message["body"]["type"] == "webhook.test"
    assert gleaner(env, "notify", "remove", sub_id).exit_code == 0
    assert json.loads(gleaner(env, "notify", "list", "--json").stdout) == []
    assert gleaner(env, "notify", "test", sub_id).exit_code == 1
    deps = make_deps(notify_run_wait=0.0)
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert len(receiver.received) == 1


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:9/hook",  # loopback
    "http://localhost:9/hook",  # a name that resolves to loopback
    "http://10.1.2.3/hook",  # private
    "http://169.254.169.254/computeMetadata/v1/",  # the metadata server
    "http://[::ffff:127.0.0.1]/hook",  # loopback wrapped in IPv6
    "ftp://example.com/hook",  # not http(s)
    "http://user:pw@example.com/hook",  # credentials in the URL
])
def test_a_subscription_to_a_private_or_unsafe_address_is_refused(env, target):
    strict = {k: v for k, v in env.items() if k != "GLEANER_ALLOW_NETWORKS"}
    result = gleaner(strict, "notify", "add", target)
    assert result.exit_code == 1
    assert "refused webhook target" in result.stderr
    assert json.loads(gleaner(strict, "notify", "list", "--json").stdout) == []


def test_unknown_event_types_are_refused(env, receiver):
    result = gleaner(env, "notify", "add", receiver.url, "--types", "document.changed,document.deleted")
    assert result.exit_code == 1 and "unknown event types ['document.deleted']" in result.stderr


def test_the_delivery_task_handler_makes_one_attempt_and_asks_cloud_tasks_to_retry_a_failure(make_deps, env,
                                                                                          receiver):
    from gleaner.changes import outbox

    deps = make_deps(notify_run_wait=1.0, notify_max_attempts=3)
    _, secret = subscribe(env, receiver.url, "--types", "document.changed")
    receiver.secret = secret
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        receiver.script = [500, 500, 500]
        pages.update(demo_pages(site.url, changed=("/about",)))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    outbox.flush(deps)
    (delivery,) = json.loads(gleaner(env, "notify", "deliveries", "--json").stdout)
    assert delivery["state"] == "pending" and len(delivery["log"]) == 1  # the run's own attempt

    def task(retry_count: int) -> tuple[Any, int]:
        request = EnvironBuilder(method="POST", path=taskentry.DELIVERY_PATH,
                                 data=encode(DeliveryTask(delivery_id=delivery["id"])),
                                 headers={"X-CloudTasks-TaskRetryCount": str(retry_count)}).get_request()
        body, status, _ = taskentry.run_delivery_task(request, deps)
        return json.loads(body), status

    assert task(1) == ({"outcome": "retry"}, 503)
    assert task(2) == ({"outcome": "failed"}, 200)  # the queue's last attempt: recorded, not retried
    assert task(3) == ({"outcome": "skipped"}, 200)
    (after,) = json.loads(gleaner(env, "notify", "deliveries", "--json").stdout)
    assert after["state"] == "failed" and [a["status"] for a in after["log"]] == [500, 500, 500]
    assert len({r["id"] for r in receiver.received}) == 1
