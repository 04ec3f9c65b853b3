"""Several sites through the functions at once: the cloud does not pay for waiting.

The real messaging path (functions-framework subprocesses, Pub/Sub emulator push, fake-gcs-server,
PostgreSQL) with the cloud's politeness on (turns and batch slots shared through PostgreSQL). A big
site whose pages come in many small batches and a small site are crawled together, while a webhook
subscriber waits for the small site's new documents. One scrape process serves batches of both
sites at once; each host's requests stay spaced by the delay; the big site's extra batches go back
to the queue instead of filling scrape's threads, so the small site is done while the big one is
still crawling; and its deliveries arrive through the notify function during the crawl. A third
site crawled once at the settings' delay and again with the run's own ``delay`` (the processes still
hold the host from the first run) sees that run's delay between every request of the second.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from typing import Any

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.changes import subscriptions
from gleaner.demosite.testsite import Page, TestSite
from gleaner.settings.config import parse_networks
from tests.cloud_fixtures import emulators
from tests.e2e.test_functions_emulated_crawl import Cloud, wait_for

DELAY = 0.3
BIG_PAGES, SMALL_PAGES = 45, 3
# The third site's second run asks for its own delay (`crawl --delay`), longer than the settings'.
AGAIN_PAGES, RUN_DELAY = 3, 1.0
# GLEANER_SCRAPE_SOFT_DEADLINE also sizes batches (stages/batching.py): 8 s / (0.3 s + 2 s) = 3 pages.
SOFT_DEADLINE = "8"
FUNCTIONS = [("map", "on_http"), ("map", "on_event"), ("sample", "on_event"), ("scrape", "on_http"),
             ("snapshot", "on_event"), ("ingest", "on_event"), ("notify", "on_http")]


def _pages(base: str, count: int, name: str) -> dict[str, Page]:
    pages = {f"/p/{i}": Page(f"<html><head><title>{name} {i}</title></head><body><article><h1>{name} {i}</h1>"
                             f"<p>{'A page of the ' + name + ' site, with enough words to extract. ' * 12}</p>"
                             "</article></body></html>") for i in range(count)}
    pages["/"] = Page(f"<html><head><title>{name}</title></head><body><a href='/p/0'>first</a></body></html>")
    pages["/robots.txt"] = Page(f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n", content_type="text/plain")
    locs = "".join(f"<url><loc>{base}/p/{i}</loc></url>" for i in range(count))
    pages["/sitemap.xml"] = Page(f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                                 f"{locs}</urlset>", content_type="application/xml")
    return pages


class Receiver:
    """A webhook receiver on loopback that notes when each delivery arrived."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.arrivals.append(time.monotonic())
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture(scope="module")
def crawl(pubsub_host: str, gcs_url: str, pg_server_url: str, pg_template: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.conftest import TEMPLATE_DB, _admin_engine, _with_database

    name = "t_" + uuid.uuid4().hex[:12]
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}"))
    database_url = _with_database(pg_server_url, name)
    workdir = tmp_path_factory.mktemp("many-sites")
    suffix = uuid.uuid4().hex[:8]
    env = {"GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": str(DELAY), "GLEANER_HOST_CONCURRENCY": "1",
           "GLEANER_SHARED_POLITENESS": "true", "GLEANER_SCRAPE_SOFT_DEADLINE": SOFT_DEADLINE,
           "GLEANER_EXTRACT_WORKERS": "1", "GLEANER_FETCH_TIMEOUT": "5", "GLEANER_HOME": str(workdir / "data"),
           "GLEANER_NOTIFY_RETRY_SECONDS": "1"}
    stack = emulators.Stack(workdir, database_url, project=f"p-{suffix}", bucket=f"b-{suffix}", extra_env=env,
                            min_backoff=0.2, max_backoff=1.0, ack_deadline=30)
    receiver = Receiver()
    receiver.thread.start()
    cloud = None
    big_pages: dict[str, Page] = {}
    small_pages: dict[str, Page] = {}
    again_pages: dict[str, Page] = {}
    try:
        with TestSite(big_pages, host="127.0.0.2", max_seconds=300) as big, \
                TestSite(small_pages, host="127.0.0.3", max_seconds=300) as small, \
                TestSite(again_pages, host="127.0.0.4", max_seconds=300) as again:
            big_pages.update(_pages(big.url, BIG_PAGES, "big"))
            small_pages.update(_pages(small.url, SMALL_PAGES, "small"))
            again_pages.update(_pages(again.url, AGAIN_PAGES, "again"))
            stack.use_emulators(pubsub_host, gcs_url).start_functions(FUNCTIONS)
            cloud = Cloud(stack, database_url, gcs_url)
            with tenancy.all_tenants():
                subscriptions.add(cloud.meta, receiver.url, site="small.test", types=("document.new",),
                                  allow=parse_networks("127.0.0.0/8"))
            runs = {site: cloud.post_crawl({"url": s.url + "/", "site_domain": site})["run_id"]
                    for site, s in (("big.test", big), ("small.test", small), ("again.test", again))}
            settled = {site: wait_for(lambda r=run: cloud.run_settled(r), 150, f"{site} to settle")
                       for site, run in runs.items()}
            # Every process that fetched the third site keeps its host at the settings' delay; a run of
            # its own delay must still get that delay.
            second_from = len(again.log)
            second = cloud.post_crawl({"url": again.url + "/", "site_domain": "again.test", "delay": RUN_DELAY})
            settled["again.test, own delay"] = wait_for(lambda: cloud.run_settled(second["run_id"]), 90,
                                                        "the run with its own delay to settle")
            wait_for(lambda: len(receiver.arrivals) >= SMALL_PAGES, 30, "the small site's deliveries")
            yield {"cloud": cloud, "big": big, "small": small, "again": again, "second_from": second_from,
                   "settled": settled, "receiver": receiver}
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        stack.stop()
        if cloud is not None:
            cloud.bus.close()
            cloud.engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def _page_times(site: TestSite) -> list[float]:
    return [r.at for r in site.log if r.path.startswith("/p/")]


def test_both_sites_finish_with_every_page_fetched(crawl):
    assert crawl["settled"]["big.test"]["status"] == "finished"
    assert crawl["settled"]["small.test"]["status"] == "finished"
    assert crawl["settled"]["big.test"]["fetched"] == BIG_PAGES
    assert crawl["settled"]["small.test"]["fetched"] == SMALL_PAGES


def test_one_scrape_process_serves_both_sites_at_once_and_each_host_keeps_its_delay(crawl):
    big, small = _page_times(crawl["big"]), _page_times(crawl["small"])
    # The two sites' pages were fetched over overlapping stretches, by the one scrape process there is.
    assert min(small) < max(big) and min(big) < max(small)
    for site in (crawl["big"], crawl["small"]):  # every request: map's, sample's and scrape's
        times = sorted(r.at for r in site.log)
        assert min(b - a for a, b in pairwise(times)) >= DELAY - 0.02


def test_the_big_sites_extra_batches_wait_in_the_queue_so_the_small_site_is_not_kept_waiting(crawl):
    scrape_log = crawl["cloud"].log("scrape", "on_http")
    assert "of big.test waits" in scrape_log  # batches beyond the site's one slot went back to the queue
    assert "of small.test waits" not in scrape_log
    # The small site was done while the big one still had pages to fetch.
    assert max(_page_times(crawl["small"])) < max(_page_times(crawl["big"])) - 2 * DELAY


def test_deliveries_go_through_the_notify_function_while_the_crawl_runs(crawl):
    arrivals = crawl["receiver"].arrivals
    assert len(arrivals) >= SMALL_PAGES
    # Sent while the big site was still being crawled: a crawl never holds deliveries back.
    assert min(arrivals) < max(_page_times(crawl["big"]))
    assert "/notify/deliver" not in crawl["cloud"].log("scrape", "on_http")
    with crawl["cloud"].engine.connect() as conn:
        states = conn.execute(sa.text("SELECT DISTINCT state FROM knowledge.notify_deliveries")).scalars().all()
    assert set(states) == {"delivered"}


def test_a_runs_own_delay_spaces_every_request_of_that_run_though_the_processes_knew_the_host(crawl):
    assert crawl["settled"]["again.test"]["status"] == "finished"
    second = crawl["settled"]["again.test, own delay"]
    assert second["status"] == "finished"
    assert second["fetched"] + second["not_modified"] == AGAIN_PAGES
    log = crawl["again"].log[crawl["second_from"]:]  # map's, sample's and scrape's requests
    assert len(log) >= AGAIN_PAGES + 2
    gaps = [(b.at - a.at, b.path) for a, b in pairwise(log)]
    assert min(gap for gap, _ in gaps) >= RUN_DELAY - 0.02, gaps
