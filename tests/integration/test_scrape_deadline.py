"""A scrape batch writes as it goes and stops at its soft deadline, handing the rest to a new task."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

import sqlalchemy as sa

from gleaner import tenancy
from gleaner.demosite.testsite import Page, TestSite
from gleaner.messages import CrawlMapped, Message, ScrapeBatch
from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import Settings
from gleaner.store.backends import db

PAGES = 30


def _answer(h: BaseHTTPRequestHandler, text: str) -> None:
    body = f"<html><head><title>{text}</title></head><body><article><p>{text} " \
           f"{'words that make an article ' * 20}</p></article></body></html>".encode()
    h.send_response(200)
    h.send_header("Content-Type", "text/html; charset=utf-8")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def _site(handler: Any) -> tuple[TestSite, dict[str, Page]]:
    links = "".join(f'<a href="/p/{i}">page {i}</a>' for i in range(PAGES))
    pages = {"/": Page(f"<html><body><h1>Index</h1>{links}</body></html>"),
             "/robots.txt": Page("", content_type="text/plain")}
    pages.update({f"/p/{i}": Page("", handler=handler) for i in range(PAGES)})
    site = TestSite(pages, max_seconds=120)
    # A sitemap lists the pages, so map's walk does not read them and scrape is the stage that fetches
    # them (each URL is fetched once per run: a page map's walk read is not asked for again by scrape).
    locs = "".join(f"<url><loc>{site.url}/p/{i}</loc></url>" for i in range(PAGES))
    pages["/sitemap.xml"] = Page(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>',
                                 content_type="application/xml")
    return site, pages


def test_a_batch_past_its_soft_deadline_hands_the_rest_to_new_tasks_and_the_run_still_finishes(make_deps):
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(0.15)
        _answer(h, h.path)

    # One fetch at a time overall; the host's own allowance is wide, so the sample stage sizes one
    # batch for the whole site and only the soft deadline cuts it.
    deps = make_deps(scrape_soft_deadline=1.0, host_concurrency=80, fetch_concurrency=1)
    site, _ = _site(slow)
    batches: list[ScrapeBatch] = []
    sampled_at: list[float] = []

    def seen(topic: str, message: Message) -> None:
        if isinstance(message, ScrapeBatch):
            batches.append(message)
        if isinstance(message, CrawlMapped):  # sampled: the scrape tasks start after this
            sampled_at.append(time.monotonic())

    with site:
        summary = crawl(deps, new_request(site.url + "/", site_domain="slow.test"), progress=seen)
    assert summary["status"] == "finished"
    assert summary["fetched"] == summary["included"] == PAGES + 1
    parts = sorted(b.part for b in batches)
    assert parts[0] == 0 and parts[-1] >= 2, parts  # the one batch needed several tasks
    assert len({b.task_name for b in batches}) == len(batches)  # each continuation has its own name
    # In the order of the hand-on chain, not of the progress calls: those come as each task *ends*, and
    # part N+1 (fetching while part N extracts and writes its last pages) can end first on a busy machine.
    chain = sorted(batches, key=lambda b: (b.batch_no, b.part))
    handed = [set(b.document_ids) for b in chain]
    # A part hands on only what it did not start: never a URL it was not given. On a loaded machine a
    # part can spend its whole 1 s deadline before its first request (reading the batch, opening the
    # fetcher) and hand every URL on as it got them; the chain still shrinks and ends (the run finished).
    assert all(later <= earlier for earlier, later in itertools.pairwise(handed)), \
        [(b.part, len(b.document_ids)) for b in chain]
    assert handed[-1] < handed[0]
    # Nothing handed on was fetched twice, and the section's sample (fetched by the sample stage) not again.
    asked = Counter(r.path for r in site.log if r.path.startswith("/p/"))
    assert asked == {f"/p/{i}": 1 for i in range(PAGES)}
    assert sampled_at


def _crawl_holding_one_request(make_deps, database_url: str, domain: str, nth: int, count_sql: str,
                               want: int) -> tuple[dict[str, Any], int]:
    """Crawl a steady site, holding the scrape's ``nth`` request (up to 4 s, under the fetch timeout, so
    it is still running) until ``count_sql`` counts ``want`` rows; the summary and the count then seen.
    The handler thread reads as the operator does, across tenants (the tables are under row-level
    security through their run or document)."""
    engine = db.create_engine(Settings(database_url=database_url))
    scraping = threading.Event()
    served: list[str] = []
    lock = threading.Lock()
    held: dict[str, int] = {}

    def counted() -> int:
        with tenancy.all_tenants(), engine.connect() as conn:
            return int(conn.execute(sa.text(count_sql)).scalar() or 0)

    def page(h: BaseHTTPRequestHandler) -> None:
        if scraping.is_set():
            with lock:
                served.append(h.path)
                seen_so_far = len(served)
            if seen_so_far == nth:
                deadline = time.monotonic() + 4.0
                while (count := counted()) < want and time.monotonic() < deadline:
                    time.sleep(0.05)
                held["count"] = count
        _answer(h, h.path)

    def seen(topic: str, message: Message) -> None:
        if isinstance(message, CrawlMapped):
            scraping.set()

    deps = make_deps(host_concurrency=1)
    site, _ = _site(page)
    try:
        with site:
            summary = crawl(deps, new_request(site.url + "/", site_domain=domain), progress=seen)
    finally:
        engine.dispose()
    return summary, held["count"]


def test_outcomes_are_in_the_ledger_while_the_batch_is_still_fetching(make_deps, database_url):
    # The batch's 20th request waits until its earlier pages' outcomes show up in the ledger.
    summary, rows = _crawl_holding_one_request(
        make_deps, database_url, "steady.test", 20,
        "SELECT count(*) FROM knowledge.crawl_page_decisions WHERE fetch_outcome = 'fetched'", 10)
    assert summary["status"] == "finished" and summary["failed"] == 0
    assert rows >= 10


def test_in_process_the_first_pages_are_snapshotted_while_the_batch_still_fetches(make_deps, database_url):
    # One of the batch's last requests waits until earlier pages have versions.
    summary, versions = _crawl_holding_one_request(
        make_deps, database_url, "streamed.test", PAGES - 2, "SELECT count(*) FROM knowledge.document_snapshots", 1)
    assert versions >= 1  # snapshot did not wait for the batch's end
    assert summary["status"] == "finished" and summary["failed"] == 0
    assert summary["snapshots"]["new"] == summary["fetched"] == PAGES + 1  # every page versioned, none twice
