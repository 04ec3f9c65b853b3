"""Webhooks never hold a crawl or outlive their subscription: a subscriber that answers 500 or never answers
does not lengthen a run, and a removed subscription receives nothing (not by retry, deliver or a later crawl).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gleaner.backoffice.api import ApiRequest, HttpError, post_retry
from gleaner.changes.sender import DeliverySender
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from tests.integration.test_notifications import Receiver, gleaner, subscribe
from tests.integration.test_notifications import env as env  # a fixture
from tests.integration.test_notifications import receiver as receiver  # a fixture

SITE = "demo.test"


@pytest.fixture
def silent() -> Iterator[str]:
    """A subscriber that accepts connections and never answers (closed after the test)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def failing() -> Iterator[Receiver]:
    r = Receiver(script=[500] * 500)
    r.thread.start()
    yield r
    r.deadline = 0
    r.thread.join(timeout=5)
    r.server.server_close()


def test_a_failing_and_a_silent_subscriber_do_not_lengthen_a_crawl(make_deps, env, failing, silent):
    deps = make_deps(notify_retry_seconds=0.1, notify_timeout=10.0)
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        started = time.monotonic()
        crawl(deps, new_request(site.url + "/", site_domain="first.test"))
        alone = time.monotonic() - started
        subscribe(env, failing.url)
        subscribe(env, silent)
        started = time.monotonic()
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        with_subscribers = time.monotonic() - started
    # Before, the run returned only after retrying the 500s and waiting out the silent one (10 s an attempt).
    assert with_subscribers < alone + 3.0, (alone, with_subscribers)
    assert summary["status"] == "finished"
    # 13 new pages and the run's end, to each of two subscribers: all still to send, and the summary says so.
    assert summary["notifications_pending"] >= 26


def test_the_background_sender_delivers_while_its_owner_goes_on(make_deps, env, receiver):
    deps = make_deps(notify_retry_seconds=0.1)
    _, receiver.secret = subscribe(env, receiver.url, "--types", "document.new")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert receiver.received == [] and summary["notifications_pending"] == 13
    with DeliverySender(deps, poll=0.1):
        deadline = time.monotonic() + 20
        while len(receiver.received) < 13 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(receiver.received) == 13 and all(r["verified"] for r in receiver.received)


def test_a_removed_subscription_gets_nothing_by_retry_deliver_or_a_later_crawl(make_deps, env):
    hook = Receiver(script=[500] * 500)
    hook.thread.start()
    try:
        deps = make_deps(notify_retry_seconds=0.1, notify_max_attempts=1, notify_run_wait=5.0)
        sub_id, _ = subscribe(env, hook.url, "--types", "document.new")
        pages: dict[str, Page] = {}
        with TestSite(pages, max_seconds=120) as site:
            pages.update(demo_pages(site.url))
            crawl(deps, new_request(site.url + "/", site_domain=SITE))
            log = json.loads(gleaner(env, "notify", "deliveries", sub_id, "--json").stdout)
            assert {d["state"] for d in log} == {"failed"} and len(hook.received) == 13
            assert gleaner(env, "notify", "remove", sub_id).exit_code == 0

            refused = gleaner(env, "notify", "retry", log[0]["id"])
            assert refused.exit_code == 1 and "subscription was removed" in refused.stderr
            with pytest.raises(HttpError) as answer:
                post_retry(deps, ApiRequest(method="POST", path=""), log[0]["id"])
            assert answer.value.status == 409
            assert "nothing due" in gleaner(env, "deliver").stdout
            pages.update(demo_pages(site.url, changed=("/about",)))
            pages["/new-page"] = Page("<html><body><p>A page added later, with words.</p></body></html>")
            summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        assert summary["notifications_pending"] == 0
        assert len(hook.received) == 13  # nothing after the removal
    finally:
        hook.deadline = 0
        hook.thread.join(timeout=5)
        hook.server.server_close()


def test_a_disabled_subscription_loses_its_pending_deliveries_and_gets_nothing_until_enabled(make_deps, env,
                                                                                              receiver):
    deps = make_deps(notify_retry_seconds=0.1)
    sub_id, _ = subscribe(env, receiver.url, "--types", "document.new,document.changed")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        assert crawl(deps, new_request(site.url + "/", site_domain=SITE))["notifications_pending"] == 13
        assert gleaner(env, "notify", "disable", sub_id).exit_code == 0
        log = json.loads(gleaner(env, "notify", "deliveries", sub_id, "--json").stdout)
        assert [d["state"] for d in log] == ["cancelled"] * 13
        [listed] = json.loads(gleaner(env, "notify", "list", "--json").stdout)
        assert listed["status"] == "disabled"
        refused = gleaner(env, "notify", "retry", log[0]["id"])
        assert refused.exit_code == 1 and "disabled" in refused.stderr
        with pytest.raises(HttpError) as answer:
            post_retry(deps, ApiRequest(method="POST", path=""), log[0]["id"])
        assert answer.value.status == 409
        assert "nothing due" in gleaner(env, "deliver").stdout
        changed = demo_pages(site.url, changed=("/pricing",))
        pages["/pricing"] = changed["/pricing"]
        pages["/pricing"].modified += 60
        assert crawl(deps, new_request(site.url + "/", site_domain=SITE))["notifications_pending"] == 0

        assert gleaner(env, "notify", "enable", sub_id).exit_code == 0
        changed = demo_pages(site.url, changed=("/about",))
        pages["/about"] = changed["/about"]
        pages["/about"].modified += 60
        assert crawl(deps, new_request(site.url + "/", site_domain=SITE))["notifications_pending"] == 1
        assert "1 delivered" in gleaner(env, "deliver").stdout
    assert [r["body"]["data"]["url"] for r in receiver.received] == [site.url + "/about"]
    assert gleaner(env, "notify", "disable", "no-such-id").exit_code != 0
