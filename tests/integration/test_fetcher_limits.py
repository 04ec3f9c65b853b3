"""Limits refuse, never truncate: sizes, compression bombs, redirects, slow drips, the run budget."""

from __future__ import annotations

import gzip
import time
import zlib
from http.server import BaseHTTPRequestHandler

import brotli
import pytest

from gleaner.demosite.testsite import Page, TestSite, redirect_page
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchOutcome
from gleaner.settings.config import Settings, parse_networks

HTML = "text/html; charset=utf-8"


def _settings(**kw: object) -> Settings:
    base = Settings(allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, fetch_timeout=2.0,
                    max_body_bytes=64 * 1024, max_decompressed_bytes=256 * 1024)
    return base.with_(**kw)


def _raw(body: bytes, *, headers: dict[str, str] | None = None, chunked: bool = False, status: int = 200) -> Page:
    """A page that sends exactly these bytes (no Content-Length when chunked)."""

    def handler(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", HTML)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for start in range(0, len(body), 16 * 1024):
                piece = body[start:start + 16 * 1024]
                try:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                except OSError:
                    return  # the fetcher hung up: it refused the body, as it should
            h.wfile.write(b"0\r\n\r\n")
        else:
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            try:
                h.wfile.write(body)
            except OSError:
                return

    return Page("", handler=handler)


def _site(**pages: Page) -> TestSite:
    return TestSite({"/robots.txt": Page("", content_type="text/plain"),
                     **{"/" + k.replace("_", "-"): v for k, v in pages.items()}}, max_seconds=30)


def test_a_declared_oversized_body_is_refused_before_reading() -> None:
    with _site(big=Page("<html>" + "x" * 70_000 + "</html>")) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/big")
    assert result.outcome is FetchOutcome.REFUSED_SIZE and "Content-Length" in result.reason
    assert result.body is None
    assert site.paths() == ["/robots.txt", "/big"]


def test_a_streamed_oversized_body_is_refused_not_truncated() -> None:
    body = b"<html>" + b"y" * 200_000 + b"</html>"
    with _site(stream=_raw(body, chunked=True)) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/stream")
    assert result.outcome is FetchOutcome.REFUSED_SIZE and "on the wire" in result.reason
    assert result.body is None
    assert site.paths() == ["/robots.txt", "/stream"]


def test_a_body_exactly_at_the_limit_is_read_whole() -> None:
    body = b"<html>" + b"z" * (64 * 1024 - 13) + b"</html>"
    assert len(body) == 64 * 1024
    with _site(edge=_raw(body, chunked=True)) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/edge")
    assert result.outcome is FetchOutcome.FETCHED and result.body == body
    assert site.requested("/edge") == 1


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compression_bomb_is_refused_on_its_decoded_size(coding: str) -> None:
    plain = b"<html>" + b"\0" * (50 * 1024 * 1024) + b"</html>"  # 50 MiB of zeros: ~50 KiB compressed
    packed = gzip.compress(plain, mtime=0) if coding == "gzip" else zlib.compress(plain, 9)
    assert len(packed) < 64 * 1024
    with _site(bomb=_raw(packed, headers={"Content-Encoding": coding})) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/bomb")
    assert result.outcome is FetchOutcome.REFUSED_SIZE and "decoded body exceeds" in result.reason
    assert site.paths() == ["/robots.txt", "/bomb"]


def test_a_small_compressed_page_is_decoded() -> None:
    plain = b"<html><body>" + b"hello " * 1000 + b"</body></html>"
    with _site(small=_raw(gzip.compress(plain), headers={"Content-Encoding": "gzip"})) as site, \
            Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/small")
    assert result.outcome is FetchOutcome.FETCHED and result.body == plain
    assert site.log[-1].headers["accept-encoding"] == "gzip, deflate"


def test_a_raw_deflate_page_is_decoded() -> None:
    plain = b"<html><body>raw deflate</body></html>"
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = squeeze.compress(plain) + squeeze.flush()
    with _site(raw=_raw(packed, headers={"Content-Encoding": "deflate"})) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/raw")
    assert result.outcome is FetchOutcome.FETCHED and result.body == plain
    assert site.requested("/raw") == 1


def test_an_unrequested_brotli_body_is_refused_content_never_decoded() -> None:
    bomb = brotli.compress(b"\0" * (20 * 1024 * 1024))
    with _site(br=_raw(bomb, headers={"Content-Encoding": "br"})) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/br")
    assert result.outcome is FetchOutcome.REFUSED_CONTENT and "content-encoding" in result.reason
    assert "br" not in site.log[-1].headers["accept-encoding"]


def test_a_redirect_loop_is_refused() -> None:
    with _site(a=redirect_page("/b"), b=redirect_page("/a")) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/a")
    assert result.outcome is FetchOutcome.REDIRECT_REFUSED and "loop" in result.reason
    assert site.paths() == ["/robots.txt", "/a", "/b"]


def test_more_redirect_hops_than_allowed_are_refused() -> None:
    hops = {f"r{i}": redirect_page(f"/r{i + 1}") for i in range(6)}
    with _site(**hops, r6=Page("<html>end</html>")) as site, Fetcher(_settings(max_redirects=3)) as fetcher:
        result = fetcher.fetch(site.url + "/r0")
    assert result.outcome is FetchOutcome.REDIRECT_REFUSED and "more than 3 redirects" in result.reason
    assert site.paths() == ["/robots.txt", "/r0", "/r1", "/r2", "/r3"]


def test_allowed_redirect_hops_are_followed_to_the_page() -> None:
    with _site(r0=redirect_page("/r1"), r1=redirect_page("/end"), end=Page("<html>end</html>")) as site, \
            Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/r0")
    assert result.outcome is FetchOutcome.FETCHED and result.final_url == site.url + "/end"
    assert site.paths() == ["/robots.txt", "/r0", "/r1", "/end"]


def test_a_redirect_to_another_scheme_is_refused() -> None:
    with _site(ftp=redirect_page("ftp://example.com/file")) as site, Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/ftp")
    assert result.outcome is FetchOutcome.REDIRECT_REFUSED
    assert site.paths() == ["/robots.txt", "/ftp"]


def _drip(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", HTML)
    h.send_header("Content-Length", "100")
    h.end_headers()
    try:
        for _ in range(100):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.05)  # each read succeeds quickly: only a total deadline stops this
    except OSError:
        return


def test_a_slow_drip_body_is_cut_off_at_the_total_deadline() -> None:
    with _site(drip=Page("", handler=_drip)) as site, Fetcher(_settings(fetch_timeout=0.5)) as fetcher:
        started = time.monotonic()
        result = fetcher.fetch(site.url + "/drip")
        took = time.monotonic() - started
    assert result.outcome is FetchOutcome.UNAVAILABLE and "timeout" in result.reason
    assert took < 2.0  # 100 drips would take 5 s
    assert site.paths() == ["/robots.txt", "/drip"]


def test_a_server_that_never_answers_is_cut_off() -> None:
    def silent(h: BaseHTTPRequestHandler) -> None:
        time.sleep(1.5)

    with _site(silent=Page("", handler=silent)) as site, Fetcher(_settings(fetch_timeout=0.3)) as fetcher:
        result = fetcher.fetch(site.url + "/silent")
    assert result.outcome is FetchOutcome.UNAVAILABLE and "timeout" in result.reason
    assert site.paths() == ["/robots.txt", "/silent"]


def _many(n: int) -> dict[str, Page]:
    return {f"p{i}": Page(f"<html><body>{'w' * 1000} {i}</body></html>") for i in range(n)}


def test_the_request_budget_leaves_every_remaining_url_exhausted() -> None:
    with _site(**_many(6)) as site, Fetcher(_settings(run_max_requests=4)) as fetcher:
        results = [fetcher.fetch(site.url + f"/p{i}") for i in range(6)]
    outcomes = [r.outcome for r in results]
    assert outcomes == [FetchOutcome.FETCHED] * 3 + [FetchOutcome.EXHAUSTED] * 3  # robots.txt took one request
    assert all("request budget" in r.reason for r in results[3:])
    assert site.paths() == ["/robots.txt", "/p0", "/p1", "/p2"]


def test_the_byte_budget_leaves_every_remaining_url_exhausted() -> None:
    with _site(**_many(6)) as site, Fetcher(_settings(run_max_bytes=2500)) as fetcher:
        results = [fetcher.fetch(site.url + f"/p{i}") for i in range(6)]
    outcomes = [r.outcome for r in results]
    assert outcomes[:2] == [FetchOutcome.FETCHED] * 2
    assert outcomes[2:] == [FetchOutcome.EXHAUSTED] * 4  # the page that overran it is exhausted too
    assert site.paths() == ["/robots.txt", "/p0", "/p1", "/p2"]


def test_the_time_budget_cuts_a_fetch_and_leaves_the_rest_exhausted() -> None:
    pages = _many(3)
    pages["drip"] = Page("", handler=_drip)
    with _site(**pages) as site, Fetcher(_settings(run_max_seconds=0.6, fetch_timeout=5.0)) as fetcher:
        first = fetcher.fetch(site.url + "/p0")
        cut = fetcher.fetch(site.url + "/drip")
        rest = [fetcher.fetch(site.url + f"/p{i}") for i in (1, 2)]
    assert first.outcome is FetchOutcome.FETCHED
    assert cut.outcome is FetchOutcome.EXHAUSTED and "time budget" in cut.reason
    assert [r.outcome for r in rest] == [FetchOutcome.EXHAUSTED] * 2
    assert site.paths() == ["/robots.txt", "/p0", "/drip"]


def test_a_budget_spent_before_robots_is_read_is_exhausted_not_robots_unknown() -> None:
    with _site(**_many(1)) as site, Fetcher(_settings(run_max_requests=1)) as fetcher:
        robots_took_it = fetcher.fetch(site.url + "/p0")
    with _site(**_many(1)) as other, Fetcher(_settings(run_max_requests=1)) as fetcher:
        fetcher.budget.claim_request()  # spent elsewhere in the run
        nothing_left = fetcher.fetch(other.url + "/p0")
    assert robots_took_it.outcome is FetchOutcome.EXHAUSTED
    assert site.paths() == ["/robots.txt"]
    assert nothing_left.outcome is FetchOutcome.EXHAUSTED
    assert other.paths() == []


def test_headers_dripped_one_byte_at_a_time_are_cut_off_at_the_total_deadline() -> None:
    def drip_headers(h: BaseHTTPRequestHandler) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + b"X-Pad: " + b"p" * 200 + b"\r\n\r\n"
        try:
            for byte in head:
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
                time.sleep(0.02)  # 250 bytes: 5 s in all, every single read well inside any read timeout
        except OSError:
            return

    with _site(slow_head=Page("", handler=drip_headers)) as site, Fetcher(_settings(fetch_timeout=0.5)) as fetcher:
        started = time.monotonic()
        result = fetcher.fetch(site.url + "/slow-head")
        took = time.monotonic() - started
    assert result.outcome is FetchOutcome.UNAVAILABLE and "timeout before the response" in result.reason
    assert took < 2.0
    assert site.paths() == ["/robots.txt", "/slow-head"]


def test_a_corrupt_gzip_body_is_refused_content() -> None:
    with _site(corrupt=_raw(b"\x1f\x8b\x08\x00garbage-not-gzip" * 10, headers={"Content-Encoding": "gzip"})) as site, \
            Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/corrupt")
    assert result.outcome is FetchOutcome.REFUSED_CONTENT and "corrupt gzip" in result.reason
    assert site.requested("/corrupt") == 1


def test_stacked_content_codings_are_refused_content() -> None:
    twice = gzip.compress(gzip.compress(b"<html>twice</html>"))
    with _site(twice=_raw(twice, headers={"Content-Encoding": "gzip, gzip"})) as site, \
            Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(site.url + "/twice")
    assert result.outcome is FetchOutcome.REFUSED_CONTENT
    assert site.requested("/twice") == 1
