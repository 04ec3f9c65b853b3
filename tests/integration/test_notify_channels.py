"""Notification channels through Apprise: a ``json://`` target on 127.0.0.1 (allowed by
GLEANER_ALLOW_NETWORKS), a Slack webhook URL whose host resolves to a private address (refused at add
and at send), digests, and URLs masked wherever subscriptions are listed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.changes import delivery, netguard, outbox, subscriptions
from gleaner.cli import main
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.errors import PolicyRefused
from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import parse_networks
from gleaner.tenancy import all_tenants
from tests.backoffice.conftest import call

SITE = "demo.test"
LOOPBACK = parse_networks("127.0.0.0/8")
SLACK = "https://hooks.slack.com/services/T0GLEANER/B0GLEANER/s3cretSlackToken42"


class Receiver:
    """Apprise's JSON service POSTs {"title", "message", …}: answers ``script`` in turn (then 200)."""

    def __init__(self, script: list[int] | None = None, max_seconds: float = 60) -> None:
        self.script = list(script or [])
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                answer = receiver.script.pop(0) if receiver.script else 200
                receiver.received.append({"body": json.loads(raw), "answer": answer,
                                          "authorization": self.headers.get("Authorization")})
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.deadline = time.monotonic() + max_seconds
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.server.timeout = 0.2
        while time.monotonic() < self.deadline:
            self.server.handle_request()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, userinfo: str = "") -> str:
        return f"json://{userinfo}127.0.0.1:{self.port}/gleaner"


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


def subscribe(env: dict[str, str], url: str, *options: str) -> str:
    added = gleaner(env, "notify", "add", url, *options)
    assert added.exit_code == 0, added.output
    return dict(line.split(None, 1) for line in added.stdout.splitlines())["id"]


def test_a_change_reaches_a_json_channel_as_a_readable_message_and_a_failure_is_retried(make_deps, env, receiver):
    deps = make_deps(notify_retry_seconds=0.1, notify_run_wait=10.0, public_url="https://gleaner.example.org")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        sub_id = subscribe(env, receiver.url("gleaner:s3cretpass@"), "--site", SITE, "--types", "document.changed")
        receiver.script = [500]
        pages.update(demo_pages(site.url, changed=("/about",)))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))  # sends before it returns
    assert [r["answer"] for r in receiver.received] == [500, 200]
    message = receiver.received[1]["body"]
    assert receiver.received[1]["authorization"].startswith("Basic ")  # the URL's credentials, sent
    assert message["title"] == f"Gleaner: changed on {SITE}"
    text = message["message"]
    doc = deps.metadata.document_by_url(site.url + "/about")
    assert f"**{SITE}** · document.changed" in text and f"About us · Demo Co — {site.url}/about (v1 → v2)" in text
    # The diff's changed lines: removed ones from version 1, added ones from version 2, bounded.
    bodies = {v["version"]: deps.blobs.get(v["content_ref"]).decode() for v in deps.metadata.snapshots_of(doc["id"])}
    excerpt = text.split("```")[1].strip().splitlines()
    assert 2 <= len(excerpt) <= 12 and all(len(line) <= 200 for line in excerpt)
    removed = [line[2:] for line in excerpt if line.startswith("- ")]
    added = [line[2:] for line in excerpt if line.startswith("+ ")]
    assert removed and added and len(removed) + len(added) == len(excerpt)
    assert all(line[:150] in bodies[1] for line in removed) and all(line[:150] in bodies[2] for line in added)
    assert f"https://gleaner.example.org/ui/documents/{doc['id']}" in text
    (log,) = json.loads(gleaner(env, "notify", "deliveries", sub_id, "--json").stdout)
    assert log["state"] == "delivered" and [(a["status"], a["error"] is None) for a in log["log"]] == [
        (None, False), (None, True)]
    assert "s3cretpass" not in json.dumps(log)


def test_channel_urls_are_masked_in_every_listing(make_deps, env, receiver):
    url = receiver.url("gleaner:s3cretpass@")
    sub_id = subscribe(env, url)
    listed = gleaner(env, "notify", "list")
    as_json = gleaner(env, "notify", "list", "--json")
    assert "s3cretpass" not in listed.stdout + as_json.stdout
    assert json.loads(as_json.stdout)[0]["url"] == f"json://gleaner:****@127.0.0.1:{receiver.port}/gleaner"
    deps = make_deps(allow_networks=LOOPBACK)
    slack = subscriptions.add(deps.metadata, SLACK, site=None, types=(), allow=(),
                              resolver=lambda host, port: ["93.184.216.34"])
    app = BackofficeApp(deps)
    page = call(app, "GET", "/ui/changes")
    api = call(app, "GET", "/v1/notify/subscriptions")
    assert page.status == api.status == 200
    for answer in (page.body.decode(), api.body.decode()):
        assert "s3cretpass" not in answer and "s3cretSlackToken42" not in answer
        assert "json://gleaner:****@127.0.0.1" in answer and "slack://T...R/B...R/s...2" in answer
    assert {s["id"] for s in api.json()["subscriptions"]} == {sub_id, slack.id}


def private(host: str, port: int) -> list[str]:
    return ["10.20.30.40"]


def test_a_slack_url_whose_host_resolves_privately_is_refused_at_add_and_at_send(make_deps, env, caplog):
    deps = make_deps(notify_max_attempts=2)
    with pytest.raises(PolicyRefused) as refused:
        subscriptions.add(deps.metadata, SLACK, site=None, types=(), allow=(), resolver=private)
    assert "hooks.slack.com resolves to 10.20.30.40" in str(refused.value)
    assert "s3cretSlackToken42" not in str(refused.value)
    assert deps.metadata.active_subscriptions() == []

    # Added while the name answered a public address; at send time it answers a private one.
    sub = subscriptions.add(deps.metadata, SLACK, site=None, types=(), allow=(),
                            resolver=lambda host, port: ["93.184.216.34"])
    deps.resolver_override = private
    response = delivery.send_test(deps, sub.id)
    assert not response.ok and "hooks.slack.com resolves to 10.20.30.40" in str(response.error)
    (logged,) = json.loads(gleaner(env, "notify", "deliveries", "--json").stdout)
    assert logged["state"] == "failed" and "10.20.30.40" in logged["log"][0]["error"]
    assert "s3cretSlackToken42" not in json.dumps(logged) + caplog.text


def test_a_name_that_rebinds_between_the_check_and_the_plugins_lookup_is_refused_at_the_socket(make_deps):
    """The pre-check sees a public address; Apprise's own lookup (inside the guard) then gets the metadata server."""
    answers = iter([["93.184.216.34"]])

    def rebinding(host: str, port: int) -> list[str]:
        return next(answers, ["169.254.169.254"])

    deps = make_deps()
    sub = subscriptions.add(deps.metadata, SLACK, site=None, types=(), allow=(),
                            resolver=lambda host, port: ["93.184.216.34"])
    deps.resolver_override = rebinding
    # The pre-check resolves hooks.slack.com, hooks.slack-gov.com and slack.com: only the first is public.
    answers = iter([["93.184.216.34"]] * 3)
    response = delivery.send_test(deps, sub.id)
    assert not response.ok
    assert "refused by the address policy: non-public address: hooks.slack.com resolves to 169.254.169.254" in str(
        response.error)


def test_the_guard_refuses_a_socket_to_a_private_address_however_it_was_reached(receiver):
    with netguard.guarded(()) as guard, pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", receiver.port), timeout=2)
    with netguard.guarded(()), pytest.raises(netguard.PolicyBlocked), socket.socket() as raw:
        raw.connect(("127.0.0.1", receiver.port))  # no lookup at all: the audit hook sees the connect
    assert any("127.0.0.1" in r for r in guard.refusals)
    with netguard.guarded(LOOPBACK):
        socket.create_connection(("127.0.0.1", receiver.port), timeout=2).close()
    socket.create_connection(("127.0.0.1", receiver.port), timeout=2).close()  # no guard: untouched


def test_a_digest_sends_one_message_per_period_listing_its_changes_once(make_deps, env, receiver):
    deps = make_deps(notify_retry_seconds=0.1, notify_run_wait=2.0)
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        # A day's digest: the test's events fall in one period unless it runs across midnight UTC.
        sub_id = subscribe(env, receiver.url(), "--types", "document.changed,run.finished", "--digest", "1d")
        pages.update(demo_pages(site.url, changed=("/about", "/pricing")))
        run = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        outbox.flush(deps)  # a second flush publishes nothing again
        assert receiver.received == []  # nothing before the period ends
        assert "nothing due" in gleaner(env, "deliver").stdout
        (pending,) = json.loads(gleaner(env, "notify", "deliveries", sub_id, "--json").stdout)
        assert pending["type"] == "notify.digest" and pending["state"] == "pending"

        # The day passes (the period's end moves to the past, as the clock would move past it).
        with all_tenants(), deps.engine.begin() as conn:
            conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET next_attempt_at = now() - interval '1 second'"
                                 " WHERE CAST(id AS text) = :i"), {"i": pending["id"]})
        assert "1 delivered" in gleaner(env, "deliver").stdout
        assert "nothing due" in gleaner(env, "deliver").stdout  # delivered once, not again
        (message,) = [r["body"] for r in receiver.received]
        text = message["message"]
        assert message["title"] == f"Gleaner digest: 3 changes on {SITE}"
        assert f"**{SITE}** (3)" in text
        assert f"Changed: About us · Demo Co — {site.url}/about (v1 → v2)" in text
        assert f"Changed: Pricing · Demo Co — {site.url}/pricing (v1 → v2)" in text
        assert f"run {run['run_id']} of {SITE} finished" in text

        # The sealed digest takes nothing more: a change published now goes to the next period's digest.
        pages.update(demo_pages(site.url, changed=("/blog",)))
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    deliveries = json.loads(gleaner(env, "notify", "deliveries", sub_id, "--json").stdout)
    (sealed,) = (d for d in deliveries if d["id"] == pending["id"])
    assert sealed["state"] == "delivered" and sealed["attempts"] == 1
    assert [(d["type"], d["state"]) for d in deliveries if d["id"] != pending["id"]] == [("notify.digest", "pending")]
    assert len(receiver.received) == 1
