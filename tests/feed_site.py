"""A loopback site for the feed and reference tests: real-looking feeds (good and hostile), articles, a PDF.

Everything is built from the site's own base URL, so links in feeds point back at it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from fpdf import FPDF

from gleaner.demosite.testsite import Page, TestSite

ARTICLES = {
    "/articles/sea-ice": ("Arctic sea ice hits a record low",
                          ["Satellite measurements show Arctic sea ice extent fell to its lowest September value.",
                           "Glaciologists attribute the loss to warmer ocean currents and a late freeze.",
                           "The record follows three years of steady decline across the Barents Sea."]),
    "/articles/solar-cells": ("Perovskite solar cells pass a durability test",
                              ["A perovskite tandem cell kept ninety percent of its efficiency after a year outdoors.",
                               "Researchers say encapsulation, not chemistry, was the missing piece.",
                               "Manufacturers expect pilot lines within two years."]),
    "/articles/tidal-power": ("Tidal turbines feed a small island grid",
                              ["Four tidal turbines now supply most of the island's electricity at night.",
                               "Operators report that maintenance intervals are longer than forecast.",
                               "The project will add two turbines next spring."]),
}


def article_html(title: str, paragraphs: list[str]) -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
            f"<nav><a href='/'>Home</a> <a href='/about'>About</a></nav>"
            f"<article><h1>{title}</h1>{body}</article><footer>Example News</footer></body></html>")


def make_pdf(title: str, lines: list[str]) -> bytes:
    """A real PDF with a text layer, built the way report generators build them."""
    pdf = FPDF()
    pdf.set_title(title)
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for line in lines:
        pdf.multi_cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


PDF_LINES = ["Permafrost thaw report, second quarter.",
             "Borehole temperatures rose at eleven of fourteen monitoring sites.",
             "Methane flux from thaw lakes doubled compared with the baseline survey."]


def rss2(base: str, paths: list[str]) -> str:
    items = "".join(
        f"<item><title>{ARTICLES.get(p, ('Report', []))[0]}</title><link>{base}{p}?utm_source=rss</link>"
        f"<guid isPermaLink='false'>id-{i}</guid><pubDate>Mon, 0{i + 1} Jun 2026 08:00:00 GMT</pubDate>"
        f"<description>&lt;p&gt;Summary {i}&lt;/p&gt;</description></item>"
        for i, p in enumerate(paths))
    return (f"<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel><title>Example News</title>"
            f"<link>{base}/</link><description>News</description>{items}</channel></rss>")


def rss1(base: str, paths: list[str]) -> str:
    seq = "".join(f"<rdf:li rdf:resource='{base}{p}'/>" for p in paths)
    items = "".join(f"<item rdf:about='{base}{p}'><title>{ARTICLES[p][0]}</title><link>{base}{p}</link></item>"
                    for p in paths)
    return ("<?xml version='1.0'?><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'"
            " xmlns='http://purl.org/rss/1.0/'>"
            f"<channel rdf:about='{base}/feeds/rss1.rdf'><title>Example RDF</title><link>{base}/</link>"
            f"<items><rdf:Seq>{seq}</rdf:Seq></items></channel>{items}</rdf:RDF>")


def rss090(base: str, paths: list[str]) -> str:
    items = "".join(f"<item><title>{ARTICLES[p][0]}</title><link>{base}{p}</link></item>" for p in paths)
    return ("<?xml version='1.0'?><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'"
            " xmlns='http://my.netscape.com/rdf/simple/0.9/'>"
            f"<channel><title>Example 0.9</title><link>{base}/</link></channel>{items}</rdf:RDF>")


def atom(base: str, paths: list[str]) -> str:
    entries = "".join(
        f"<entry><title>{ARTICLES[p][0]}</title><link rel='alternate' href='{p}'/><id>urn:x:{i}</id>"
        f"<updated>2026-06-0{i + 1}T08:00:00Z</updated></entry>"
        for i, p in enumerate(paths))
    return ("<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'"
            f" xml:base='{base}/'><title>Example Atom</title><id>urn:x</id><updated>2026-06-01T00:00:00Z</updated>"
            f"{entries}</feed>")


BOMB = ("<?xml version='1.0'?><!DOCTYPE rss [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;'>"
        "<!ENTITY c '&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;'><!ENTITY d '&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;'>]>"
        "<rss version='2.0'><channel><title>&d;</title><item><title>&d;</title><link>/articles/sea-ice</link>"
        "</item></channel></rss>")


class Flaky:
    """A page that answers 500 for its first ``failures`` requests, then the real page.

    (500, not 503: the fetcher retries a 503 once after a pause, as a polite crawler should.)
    """

    def __init__(self, page: Page, failures: int) -> None:
        self.page = page
        self.failures = failures
        self._lock = threading.Lock()

    def __call__(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            failing = self.failures > 0
            self.failures -= 1
        status, content_type, data = (500, "text/plain", b"broken") if failing else (
            200, self.page.content_type, self.page.data)
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def feed_pages(base: str) -> dict[str, Page]:
    paths = list(ARTICLES)
    pages: dict[str, Page] = {p: Page(article_html(*ARTICLES[p])) for p in paths}
    pdf = make_pdf("Permafrost thaw report", PDF_LINES)
    pages["/reports/permafrost.pdf"] = Page(pdf, content_type="application/pdf")
    pages["/reports/octet.pdf"] = Page(pdf, content_type="application/octet-stream")
    pages["/"] = Page("<!doctype html><html><head><title>Example News</title>"
                      "<link rel='alternate' type='application/atom+xml' href='/feeds/atom.xml'></head><body>"
                      "<a href='/about'>About</a></body></html>")
    pages["/about"] = Page("<html><head><title>About</title></head><body><p>About us.</p></body></html>")
    pages["/feeds/rss2.xml"] = Page(rss2(base, paths[:2]), content_type="application/rss+xml")
    pages["/feeds/rss1.rdf"] = Page(rss1(base, paths[1:]), content_type="application/rdf+xml")
    pages["/feeds/rss090.rdf"] = Page(rss090(base, paths[:1]), content_type="application/rdf+xml")
    pages["/feeds/atom.xml"] = Page(atom(base, paths[2:]), content_type="application/atom+xml")
    pages["/feeds/bad.xml"] = Page(rss2(base, paths[:2]).replace("</channel></rss>", "<item><title>A & B"),
                                   content_type="application/rss+xml")
    latin = rss2(base, paths[:1]).replace("Arctic", "Arctic café").encode("latin-1")
    pages["/feeds/latin1.xml"] = Page(latin, content_type="application/rss+xml")
    pages["/feeds/bomb.xml"] = Page(BOMB, content_type="application/rss+xml")
    filler = "".join(f"<item><title>Filler {i}</title><link>{base}/filler/{i}</link><description>"
                     f"{'x' * 600}</description></item>" for i in range(9000))
    pages["/feeds/huge.xml"] = Page(f"<?xml version='1.0'?><rss version='2.0'><channel><title>Huge</title>"
                                    f"{filler}</channel></rss>", content_type="application/rss+xml")
    pages["/feeds/not-a-feed.xml"] = Page("<html><body>Moved</body></html>", content_type="application/xml")
    return pages


@contextmanager
def feed_site(max_seconds: float = 120) -> Iterator[TestSite]:
    """The feed articles' site on 127.0.0.1, its pages pointing at its own address."""
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=max_seconds) as site:
        pages.update(feed_pages(site.url))
        yield site
