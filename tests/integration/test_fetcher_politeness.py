"""Politeness and content rules, measured at the server: concurrency, delay, headers, cookies, 304, 429, types."""

from __future__ import annotations

import itertools
import threading
import time
from http.server import BaseHTTPRequestHandler

from gleaner.demosite.testsite import Page, TestSite
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchOutcome, FetchRequest
from gleaner.settings.config import Settings, parse_networks


def _settings(**kw: object) -> Settings:
    base = Settings(allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, fetch_timeout=3.0)
    return base.with_(**kw)


class _SlowSite(TestSite):
    """Pages that take 0.15 s to answer. ``max_active`` is the most requests inside that pause at once.

    Counted inside the handler, not around it: after the last byte is written the server thread
    still has bookkeeping to do, and a fast client may already have sent its next request on
    another connection, which is not two requests at a time from the host's point of view.
    """

    def __init__(self, n: int) -> None:
        self._pausing = 0
        self._pause_lock = threading.Lock()
        pages = {f"/s{i}": Page("", handler=self._slow) for i in range(n)}
        pages["/robots.txt"] = Page("", content_type="text/plain")
        super().__init__(pages, max_seconds=30)
        self.max_pausing = 0

    def _slow(self, h: BaseHTTPRequestHandler) -> None:
        with self._pause_lock:
            self._pausing += 1
            self.max_pausing = max(self.max_pausing, self._pausing)
        try:
            time.sleep(0.15)  # long enough for concurrent requests to overlap at the server
        finally:
            with self._pause_lock:
                self._pausing -= 1
        body = b"<html><body>slow</body></html>"
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def _slow_site(n: int) -> _SlowSite:
    return _SlowSite(n)


def test_one_request_at_a_time_per_host_by_default() -> None:
    with _slow_site(6) as site, Fetcher(_settings(host_concurrency=1, fetch_concurrency=8)) as fetcher:
        results = list(fetcher.fetch_many(FetchRequest(site.url + f"/s{i}") for i in range(6)))
    assert all(r.outcome is FetchOutcome.FETCHED for r in results)
    assert site.max_pausing == 1
    assert len(site.log) == 7


def test_a_per_host_concurrency_from_source_hosts_is_honoured() -> None:
    seen: list[str] = []

    def politeness(host: str) -> tuple[float | None, int | None]:
        seen.append(host)
        return None, 3

    with _slow_site(9) as site, \
            Fetcher(_settings(host_concurrency=1, fetch_concurrency=8), host_politeness=politeness) as fetcher:
        results = list(fetcher.fetch_many(FetchRequest(site.url + f"/s{i}") for i in range(9)))
    assert all(r.outcome is FetchOutcome.FETCHED for r in results)
    assert 1 < site.max_pausing <= 3
    assert seen == ["127.0.0.1"]


def test_the_default_delay_spaces_requests_to_one_host() -> None:
    pages = {"/": Page("<html>a</html>"), "/b": Page("<html>b</html>"),
             "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings(host_delay=0.3)) as fetcher:
        for path in ("/", "/b"):
            assert fetcher.fetch(site.url + path).outcome is FetchOutcome.FETCHED
    times = [r.at for r in site.log]
    assert [b - a >= 0.25 for a, b in itertools.pairwise(times)] == [True, True]


def test_only_fixed_headers_are_sent_never_cookies_or_credentials() -> None:
    def set_cookie(h: BaseHTTPRequestHandler) -> None:
        body = b"<html><body>cookie</body></html>"
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Set-Cookie", "session=secret; Path=/")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    pages = {"/c": Page("", handler=set_cookie), "/d": Page("<html>d</html>"),
             "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        first = fetcher.fetch(site.url + "/c")
        second = fetcher.fetch(site.url + "/d")
        with_userinfo = fetcher.fetch(site.url.replace("http://", "http://me:pw@") + "/d")
    assert (first.outcome, second.outcome) == (FetchOutcome.FETCHED, FetchOutcome.FETCHED)
    assert with_userinfo.outcome is FetchOutcome.UNAVAILABLE and "credentials" in with_userinfo.reason
    assert site.paths() == ["/robots.txt", "/c", "/d"]
    for request in site.log:
        assert set(request.headers) <= {"host", "user-agent", "accept", "accept-encoding", "connection"}
        assert request.headers["user-agent"].startswith("Gleaner/")


def test_a_conditional_get_yields_not_modified_with_no_body() -> None:
    page = Page("<html><body>stable</body></html>")
    pages = {"/p": page, "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        first = fetcher.fetch(site.url + "/p")
        by_etag = fetcher.fetch(FetchRequest(site.url + "/p", etag=first.etag))
        by_date = fetcher.fetch(FetchRequest(site.url + "/p", last_modified=first.last_modified))
        page.body = "<html><body>changed</body></html>"
        changed = fetcher.fetch(FetchRequest(site.url + "/p", etag=first.etag))
    assert first.outcome is FetchOutcome.FETCHED and first.etag
    assert by_etag.outcome is FetchOutcome.NOT_MODIFIED and by_etag.body is None
    assert by_date.outcome is FetchOutcome.NOT_MODIFIED
    assert changed.outcome is FetchOutcome.FETCHED and b"changed" in (changed.body or b"")
    assert site.log[2].headers["if-none-match"] == first.etag
    assert site.log[3].headers["if-modified-since"] == first.last_modified
    assert "if-none-match" not in site.log[1].headers


def test_a_304_to_an_unconditional_request_is_unavailable() -> None:
    def always_304(h: BaseHTTPRequestHandler) -> None:
        h.send_response(304)
        h.end_headers()

    pages = {"/p": Page("", handler=always_304), "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/p")
    assert result.outcome is FetchOutcome.UNAVAILABLE and "unexpected 304" in result.reason
    assert site.requested("/p") == 1


def _busy_then_ok(status: int, retry_after: str) -> Page:
    calls = {"n": 0}

    def handler(h: BaseHTTPRequestHandler) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            h.send_response(status)
            h.send_header("Retry-After", retry_after)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        body = b"<html><body>ok now</body></html>"
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return Page("", handler=handler)


def test_a_429_with_retry_after_is_waited_out_and_retried_once() -> None:
    pages = {"/p": _busy_then_ok(429, "1"), "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/p")
    assert result.outcome is FetchOutcome.FETCHED
    assert site.paths() == ["/robots.txt", "/p", "/p"]
    assert site.log[2].at - site.log[1].at >= 0.95


def test_a_retry_after_beyond_the_cap_is_not_retried_and_slows_the_host() -> None:
    pages = {"/p": _busy_then_ok(503, "3600"), "/q": Page("<html>q</html>"),
             "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings(max_retry_after=0.5)) as fetcher:
        result = fetcher.fetch(site.url + "/p")
        after = fetcher.fetch(site.url + "/q")
    assert result.outcome is FetchOutcome.UNAVAILABLE and "HTTP 503" in result.reason
    assert "Retry-After 3600" in result.reason
    assert after.outcome is FetchOutcome.FETCHED
    assert site.paths() == ["/robots.txt", "/p", "/q"]  # no retry of /p
    assert site.log[2].at - site.log[1].at >= 0.45  # the host was given the capped pause before /q


def test_denied_statuses_are_denied_and_never_retried() -> None:
    pages = {f"/{s}": Page("<html>no</html>", status=s) for s in (401, 403, 407, 451)}
    pages["/robots.txt"] = Page("", content_type="text/plain")
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        results = [fetcher.fetch(site.url + f"/{s}") for s in (401, 403, 407, 451)]
    assert [r.outcome for r in results] == [FetchOutcome.DENIED] * 4
    assert site.paths() == ["/robots.txt", "/401", "/403", "/407", "/451"]


def test_only_html_and_xhtml_are_accepted_as_pages() -> None:
    pages = {
        "/html": Page("<html>h</html>", content_type="text/html"),
        "/xhtml": Page("<html xmlns='http://www.w3.org/1999/xhtml'>x</html>", content_type="application/xhtml+xml"),
        "/pdf": Page(b"%PDF-1.4", content_type="application/pdf"),
        "/json": Page("{}", content_type="application/json"),
        "/untyped-html": Page("", handler=lambda h: _untyped(h, b"<!DOCTYPE html><html>u</html>")),
        "/untyped-bin": Page("", handler=lambda h: _untyped(h, b"\x00\x01binary")),
        "/robots.txt": Page("", content_type="text/plain"),
    }
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        got = {p: fetcher.fetch(site.url + p) for p in pages if p != "/robots.txt"}
    assert got["/html"].outcome is FetchOutcome.FETCHED
    assert got["/xhtml"].outcome is FetchOutcome.FETCHED
    assert got["/untyped-html"].outcome is FetchOutcome.FETCHED
    for path in ("/pdf", "/json", "/untyped-bin"):
        assert got[path].outcome is FetchOutcome.REFUSED_CONTENT, path
    assert "application/pdf" in got["/pdf"].reason
    assert site.requested("/pdf") == 1


def _untyped(h: BaseHTTPRequestHandler, body: bytes) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def test_text_is_decoded_by_the_declared_or_sniffed_charset() -> None:
    text = "<html><head><meta charset='windows-1252'></head><body>caf\u00e9 \u20ac</body></html>"
    pages = {
        "/declared": Page(text.encode("iso-8859-15"), content_type="text/html; charset=iso-8859-15"),
        "/sniffed": Page(text.encode("windows-1252"), content_type="text/html"),
        "/robots.txt": Page("", content_type="text/plain"),
    }
    with TestSite(pages, max_seconds=30) as site, Fetcher(_settings()) as fetcher:
        declared = fetcher.fetch(site.url + "/declared")
        sniffed = fetcher.fetch(site.url + "/sniffed")
    assert "caf\u00e9 \u20ac" in declared.text()
    assert "caf\u00e9 \u20ac" in sniffed.text()
    assert site.paths() == ["/robots.txt", "/declared", "/sniffed"]


def test_fetchers_sharing_the_process_host_table_take_turns_on_a_host() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from gleaner.fetch.politeness import HostTable

    table = HostTable()
    with _slow_site(6) as site, Fetcher(_settings(), hosts=table) as first, Fetcher(_settings(), hosts=table) as second:
        def run(fetcher: Fetcher, paths: range) -> list[FetchOutcome]:
            return [r.outcome for r in fetcher.fetch_many(FetchRequest(site.url + f"/s{i}") for i in paths)]

        with ThreadPoolExecutor(2) as pool:
            both = [pool.submit(run, first, range(0, 3)), pool.submit(run, second, range(3, 6))]
            outcomes = [outcome for future in both for outcome in future.result()]
    assert outcomes == [FetchOutcome.FETCHED] * 6
    assert site.max_pausing == 1  # two stages at once, still one request at a time on the host
    assert site.requested("/robots.txt") == 2  # each fetcher here reads robots (no shared run cache given)
