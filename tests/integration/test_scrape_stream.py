"""A polite crawl stores its pages as it goes: when the site is asked for its last page, the pages fetched
before it have their snapshots already, so little is left to store at the run's end."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

from gleaner import tenancy
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request

from ..generated_site import site_pages

HOLD_SECONDS = 20.0


class PageHeld:
    """Serve the article pages; hold the answer to the ``nth`` one asked for until ``ready()`` reaches
    ``wanted`` (or HOLD_SECONDS pass), and remember what ``ready()`` said while it held it."""

    def __init__(self, pages: dict[str, Page], ready, nth: int, wanted: int) -> None:
        self.pages = dict(pages)
        self.ready = ready
        self.nth, self.wanted = nth, wanted
        self.asked = 0
        self.lock = threading.Lock()
        self.stored_while_held: int | None = None

    def page(self, path: str) -> Page:
        return Page("", handler=lambda h: self.answer(h, self.pages[path]))

    def answer(self, h: BaseHTTPRequestHandler, page: Page) -> None:
        with self.lock:
            self.asked += 1
            held = self.asked == self.nth
        if held:
            deadline = time.monotonic() + HOLD_SECONDS
            stored = self.ready()
            while stored < self.wanted and time.monotonic() < deadline:
                time.sleep(0.05)
                stored = self.ready()
            self.stored_while_held = stored
        h.send_response(200)
        h.send_header("Content-Type", page.content_type)
        h.send_header("Content-Length", str(len(page.data)))
        h.end_headers()
        h.wfile.write(page.data)


def crawl_holding(make_deps, site_domain: str, pages_n: int, nth: int, wanted: int) -> tuple[dict, PageHeld]:
    """Crawl a polite site of ``pages_n`` articles whose ``nth`` page is held back as PageHeld says."""
    deps = make_deps(host_delay=0.1, host_concurrency=1, fetch_timeout=HOLD_SECONDS + 10)
    observer = make_deps()
    served: dict[str, Page] = {}
    with TestSite(served, max_seconds=120) as site:
        request = new_request(site.url + "/", site_domain=site_domain)

        def stored() -> int:  # what `gleaner runs RUN_ID --urls` lists with a snapshot
            with tenancy.all_tenants():
                return sum(1 for url in observer.metadata.run_urls(request.run_id) if url["snapshot"] == "new")

        pages = site_pages(site.url, pages_n)
        held = PageHeld(pages, stored, nth=nth, wanted=wanted)
        served.update(pages)
        served.update({path: held.page(path) for path in pages if path.startswith("/p/")})
        return crawl(deps, request), held


def test_pages_fetched_before_a_polite_sites_last_page_are_stored_before_it_is_asked_for(make_deps):
    pages_n = 12
    summary, held = crawl_holding(make_deps, "stream.test", pages_n, nth=pages_n, wanted=pages_n // 2)

    assert summary["status"] == "finished" and summary["fetched"] == summary["snapshots"]["new"] == pages_n
    # While the site kept its last page back, the pages fetched long before it had their snapshots already:
    # the run was still fetching (at least the first of the lumps it hands on as it goes).
    assert held.stored_while_held is not None and held.stored_while_held >= pages_n // 2


def test_a_slow_sites_first_pages_are_stored_long_before_half_its_pages_are_fetched(make_deps, monkeypatch):
    from gleaner.stages import scrapebatch

    # Pages go on once the oldest has waited this long, whatever their number (here the count rules
    # would hold them until half the site is fetched); the machine's load is not this test's subject.
    monkeypatch.setattr(scrapebatch, "HAND_ON_AFTER", 0.3)
    monkeypatch.setattr(scrapebatch, "SPARE_BELOW", 1.01)
    pages_n = 30
    summary, held = crawl_holding(make_deps, "slow.test", pages_n, nth=8, wanted=2)

    assert summary["status"] == "finished" and summary["snapshots"]["new"] == pages_n
    # While the site held its 8th page back, some of the seven before it had their snapshots already.
    assert held.stored_while_held is not None and held.stored_while_held >= 2
