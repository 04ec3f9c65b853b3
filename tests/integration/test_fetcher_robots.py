"""robots.txt over real HTTP: read once per host before any page, and fail closed when it cannot be read."""

from __future__ import annotations

import itertools
import time
from http.server import BaseHTTPRequestHandler

import pytest

from gleaner.demosite.testsite import Page, TestSite
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchOutcome, FetchRequest
from gleaner.settings.config import Settings, parse_networks


def _settings(**kw: object) -> Settings:
    base = Settings(allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, fetch_timeout=2.0)
    return base.with_(**kw)


def _pages(robots: Page | None) -> dict[str, Page]:
    pages = {"/": Page("<html><body>home</body></html>"), "/a": Page("<html><body>a</body></html>"),
             "/private/x": Page("<html><body>secret</body></html>")}
    if robots is not None:
        pages["/robots.txt"] = robots
    return pages


def _robots(text: str | bytes, **kw: object) -> Page:
    return Page(text, content_type="text/plain", **kw)  # type: ignore[arg-type]


def test_robots_is_read_once_before_any_page_and_obeyed() -> None:
    pages = _pages(_robots("User-agent: *\nDisallow: /private\n"))
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        results = list(fetcher.fetch_many(FetchRequest(site.url + p) for p in ("/", "/a", "/private/x", "/")))
    outcomes = sorted(str(r.outcome) for r in results)
    assert outcomes == ["fetched", "fetched", "fetched", "robots-denied"]
    assert site.paths()[0] == "/robots.txt"
    assert site.requested("/robots.txt") == 1
    assert site.requested("/private/x") == 0


def test_robots_is_matched_on_our_product_token_and_the_header_is_identifying() -> None:
    pages = _pages(_robots("User-agent: *\nDisallow: /\n\nUser-agent: Gleaner\nDisallow: /private\n"))
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        allowed = fetcher.fetch(site.url + "/a")
        denied = fetcher.fetch(site.url + "/private/x")
    assert (allowed.outcome, denied.outcome) == (FetchOutcome.FETCHED, FetchOutcome.ROBOTS_DENIED)
    assert site.paths() == ["/robots.txt", "/a"]
    assert all(r.headers["user-agent"].startswith("Gleaner/") and "(+http" in r.headers["user-agent"]
               for r in site.log)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_a_4xx_robots_means_no_rules(status: int) -> None:
    pages = _pages(_robots("User-agent: *\nDisallow: /\n", status=status))
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/private/x")
        assert fetcher.robots(site.url + "/").state == "none"
    assert result.outcome is FetchOutcome.FETCHED
    assert site.paths() == ["/robots.txt", "/private/x"]


def test_a_missing_robots_means_no_rules() -> None:
    with TestSite(_pages(None), max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/a")
    assert result.outcome is FetchOutcome.FETCHED
    assert site.paths() == ["/robots.txt", "/a"]


def _assert_host_unknown(site: TestSite, fetcher: Fetcher, requested: tuple[str, ...] = ("/robots.txt",)) -> None:
    results = [fetcher.fetch(site.url + p) for p in ("/", "/a")]
    assert [r.outcome for r in results] == [FetchOutcome.ROBOTS_UNKNOWN] * 2
    assert fetcher.robots(site.url + "/").state == "unknown"
    assert site.paths() == list(requested)  # robots.txt only: no page of the host was requested


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_a_5xx_or_429_robots_means_nothing_is_fetched_on_that_host(status: int) -> None:
    pages = _pages(_robots("", status=status, headers={"Retry-After": "60"}))
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        _assert_host_unknown(site, fetcher)


def test_a_robots_timeout_means_nothing_is_fetched_on_that_host() -> None:
    def hang(h: BaseHTTPRequestHandler) -> None:
        time.sleep(1.0)

    with TestSite(_pages(Page("", handler=hang)), max_seconds=30) as site, \
            Fetcher(_settings(fetch_timeout=0.3)) as fetcher:
        _assert_host_unknown(site, fetcher)
        assert "timeout" in fetcher.robots(site.url + "/").reason


def test_a_robots_redirect_loop_means_nothing_is_fetched_on_that_host() -> None:
    def loop(h: BaseHTTPRequestHandler) -> None:
        h.send_response(301)
        h.send_header("Location", "/robots.txt?again" if "again" not in h.path else "/robots.txt")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with TestSite(_pages(Page("", handler=loop)), max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        _assert_host_unknown(site, fetcher, ("/robots.txt", "/robots.txt?again"))
        assert "loop" in fetcher.robots(site.url + "/").reason


def test_robots_redirects_are_followed_to_the_rules() -> None:
    def moved(h: BaseHTTPRequestHandler) -> None:
        h.send_response(301)
        h.send_header("Location", "/real-robots.txt")
        h.send_header("Content-Length", "0")
        h.end_headers()

    pages = _pages(Page("", handler=moved))
    pages["/real-robots.txt"] = _robots("User-agent: *\nDisallow: /private\n")
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        assert fetcher.fetch(site.url + "/private/x").outcome is FetchOutcome.ROBOTS_DENIED
    assert site.paths() == ["/robots.txt", "/real-robots.txt"]


def test_an_oversized_robots_means_nothing_is_fetched_on_that_host() -> None:
    big = "User-agent: *\n" + "Disallow: /x\n" * 2000
    with TestSite(_pages(_robots(big)), max_seconds=30) as site, \
            Fetcher(_settings(robots_max_bytes=4096)) as fetcher:
        _assert_host_unknown(site, fetcher)
        assert "oversized" in fetcher.robots(site.url + "/").reason


def test_robots_with_a_bom_crlf_and_non_ascii_is_read_as_utf8() -> None:
    text = "\ufeffUser-agent: *\r\nDisallow: /caf\u00e9\r\n"
    pages = _pages(_robots(text.encode("utf-8")))
    pages["/caf%C3%A9"] = Page("<html><body>cafe</body></html>")
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        assert fetcher.fetch(site.url + "/caf\u00e9").outcome is FetchOutcome.ROBOTS_DENIED
        assert fetcher.fetch(site.url + "/a").outcome is FetchOutcome.FETCHED
    assert site.paths() == ["/robots.txt", "/a"]


def test_a_percent_encoded_path_cannot_step_around_a_disallow() -> None:
    pages = _pages(_robots("User-agent: *\nDisallow: /admin\n"))
    pages["/admin"] = Page("<html><body>admin</body></html>")
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/%61dmin")
    assert result.outcome is FetchOutcome.ROBOTS_DENIED
    assert site.paths() == ["/robots.txt"]


def test_a_redirect_into_a_disallowed_path_is_robots_denied() -> None:
    def to_private(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", "/private/x")
        h.send_header("Content-Length", "0")
        h.end_headers()

    pages = _pages(_robots("User-agent: *\nDisallow: /private\n"))
    pages["/go"] = Page("", handler=to_private)
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/go")
    assert result.outcome is FetchOutcome.ROBOTS_DENIED and "redirect target" in result.reason
    assert site.paths() == ["/robots.txt", "/go"]


def test_crawl_delay_spaces_requests_to_the_host() -> None:
    pages = _pages(_robots("User-agent: *\nCrawl-delay: 0.4\n"))
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        results = list(fetcher.fetch_many(FetchRequest(site.url + p) for p in ("/", "/a", "/")))
    assert all(r.outcome is FetchOutcome.FETCHED for r in results)
    times = [r.at for r in site.log]
    assert len(times) == 4
    gaps = [b - a for a, b in itertools.pairwise(times[1:])]  # between page requests
    assert all(gap >= 0.35 for gap in gaps), gaps


def test_a_redirect_to_another_origin_reads_that_origins_robots_first() -> None:
    other_pages = {"/robots.txt": _robots("User-agent: gleaner\nDisallow: /page\n"),
                   "/page": Page("<html>other</html>"), "/open": Page("<html>open</html>")}
    with TestSite(other_pages, max_seconds=30) as other, TestSite(_pages(None), max_seconds=30) as site:
        for name, target in (("/to-page", "/page"), ("/to-open", "/open")):
            location = other.url + target

            def handler(h: BaseHTTPRequestHandler, location: str = location) -> None:
                h.send_response(301)
                h.send_header("Location", location)
                h.send_header("Content-Length", "0")
                h.end_headers()

            site.pages[name] = Page("", handler=handler)
        with Fetcher(_settings()) as fetcher:
            denied = fetcher.fetch(site.url + "/to-page")
            allowed = fetcher.fetch(site.url + "/to-open")
    assert denied.outcome is FetchOutcome.ROBOTS_DENIED and "redirect target" in denied.reason
    assert allowed.outcome is FetchOutcome.FETCHED and allowed.final_url == other.url + "/open"
    assert site.paths() == ["/robots.txt", "/to-page", "/to-open"]
    assert other.paths() == ["/robots.txt", "/open"]
