"""A generated loopback site for the failure tests: N article pages, all listed in its sitemap.

One section (``/p/``), so the sample stage fetches one page; the start page links to a few pages
and the sitemap lists them all, so map walks only the start page. Deterministic text, different
per page, long enough for the extractor to keep it. A gate can hold any path's answer until the
test releases it (to stop a crawl at a known stage).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from gleaner.demosite.testsite import Page, TestSite

_TEXT = ("gleaner keeps an auditable copy of every page it reads and verifies each quote against the exact "
         "bytes stored for the version that held it while the crawl settles every run")
_WORDS = _TEXT.split()


def article(i: int) -> str:
    rng = random.Random(i)
    paragraphs = "".join(
        "<p>" + " ".join(rng.choice(_WORDS) for _ in range(60)) + f" page {i} paragraph {n}.</p>" for n in range(4))
    return (f"<html><head><title>Article {i}</title></head><body><article><h1>Article {i}</h1>{paragraphs}"
            "</article></body></html>")


def site_pages(base: str, n: int) -> dict[str, Page]:
    pages = {f"/p/{i}": Page(article(i)) for i in range(n)}
    links = "".join(f'<li><a href="/p/{i}">Article {i}</a></li>' for i in range(min(n, 5)))
    pages["/"] = Page(f"<html><head><title>Home</title></head><body><h1>Home</h1><ul>{links}</ul></body></html>")
    pages["/robots.txt"] = Page(f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n", content_type="text/plain")
    urls = "".join(f"<url><loc>{base}/p/{i}</loc></url>" for i in range(n))
    pages["/sitemap.xml"] = Page(
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>',
        content_type="application/xml")
    return pages


class Gate:
    """Hold the answers to one path until released (or ``limit`` seconds pass)."""

    def __init__(self, page: Page, limit: float = 60.0) -> None:
        self.page = page
        self.limit = limit
        self.reached = threading.Event()
        self.released = threading.Event()

    def handler(self, h: BaseHTTPRequestHandler) -> None:
        self.reached.set()
        self.released.wait(self.limit)
        data = self.page.data
        h.send_response(200)
        h.send_header("Content-Type", self.page.content_type)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


@contextmanager
def generated_site(n: int = 150, max_seconds: float = 900.0) -> Iterator[TestSite]:
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=max_seconds, max_requests=50_000) as site:
        pages.update(site_pages(site.url, n))
        yield site


def page_requests(site: TestSite, since: int = 0, conditional: bool = False) -> Counter[str]:
    """GETs per article path from log position ``since`` on (conditional ones only if asked)."""
    return Counter(r.path for r in site.log[since:]
                   if r.path.startswith("/p/") and (conditional or "if-none-match" not in r.headers))
