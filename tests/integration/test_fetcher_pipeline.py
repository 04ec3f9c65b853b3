"""Every URL of a run ends with one recorded status, through the real pipeline (map → sample → scrape)."""

from __future__ import annotations

import gzip
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import sqlalchemy as sa
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.testsite import Page, TestSite, redirect_page
from gleaner.runtime.runner import crawl, new_request


def article(title: str, seed: str, *, extra: str = "") -> str:
    """A page with enough main text to be included, and no links (the sitemap lists what exists)."""
    words = " ".join(f"{title.lower()} {seed} sentence {i} about fetching politely and safely." for i in range(12))
    return (f"<!doctype html><html><head><title>{title}</title></head><body><main><article><h1>{title}</h1>"
            f"<p>{words}</p><p>{words}</p>{extra}</article></main></body></html>")


def _bomb() -> Page:
    packed = gzip.compress(b"<html>" + b"\0" * (8 * 1024 * 1024) + b"</html>", mtime=0)

    def handler(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(packed)))
        h.end_headers()
        h.wfile.write(packed)

    return Page("", handler=handler)


def _site(paths: dict[str, Page]) -> dict[str, Page]:
    pages: dict[str, Page] = {
        "/": Page(article("Home", "/")),
        "/robots.txt": Page("User-agent: *\nDisallow: /docs/h-secret\n", content_type="text/plain"),
        **paths,
    }
    return pages


def _sitemap(base: str, paths: list[str]) -> Page:
    locs = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    return Page(f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>',
                content_type="application/xml")


def _outcomes(deps: Any, run_id: str) -> dict[str, tuple[str | None, str | None]]:
    with deps.metadata.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT d.path, c.fetch_outcome::text, c.fetch_reason FROM knowledge.crawl_page_decisions c"
            " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r"), {"r": run_id}).all()
    return {r[0]: (r[1], r[2]) for r in rows}


def test_every_url_of_a_run_gets_its_status_recorded_and_counted(make_deps: Any) -> None:
    docs: dict[str, Page] = {
        "/docs/a-ok": Page(article("Ok", "/docs/a-ok")),
        "/docs/b-denied": Page(article("Denied", "b"), status=403),
        "/docs/c-broken": Page(article("Broken", "c"), status=500),
        "/docs/d-big": Page(article("Big", "d", extra="<p>" + "big " * 20_000 + "</p>")),
        "/docs/e-pdf": Page(b"%PDF-1.4 not a page", content_type="application/pdf"),
        "/docs/f-loop": redirect_page("/docs/f-loop"),
        "/docs/g-metadata": redirect_page("http://169.254.169.254/latest/meta-data/"),
        "/docs/h-secret": Page(article("Secret", "h")),
        "/docs/i-bomb": _bomb(),
    }
    pages = _site(docs)
    deps = make_deps(max_body_bytes=64 * 1024, max_decompressed_bytes=256 * 1024)
    with TestSite(pages, max_seconds=60) as site:
        pages["/sitemap.xml"] = _sitemap(site.url, list(docs))
        request = new_request(site.url + "/", site_domain="statuses.test")
        summary = crawl(deps, request)
    outcomes = {path: outcome for path, (outcome, _reason) in _outcomes(deps, request.run_id).items()}
    assert outcomes == {
        "/": "fetched",
        "/docs/a-ok": "fetched",
        "/docs/b-denied": "denied",
        "/docs/c-broken": "unavailable",
        "/docs/d-big": "refused-size",
        "/docs/e-pdf": "refused-content",
        "/docs/f-loop": "redirect-refused",
        "/docs/g-metadata": "unavailable",
        "/docs/h-secret": "robots-denied",
        "/docs/i-bomb": "refused-size",
    }
    assert summary["status"] == "finished"
    # Refused by policy (size, content, redirects, robots.txt, a non-public address) is not failed.
    assert (summary["fetched"], summary["failed"], summary["refused"]) == (2, 2, 6)
    assert deps.metadata.outcome_breakdown(request.run_id) == {
        "denied": 1, "fetched": 2, "redirect-refused": 1, "refused-content": 1, "refused-size": 2,
        "robots-denied": 1, "unavailable": 2}
    assert site.requested("/docs/h-secret") == 0
    assert site.requested("/robots.txt") == 1  # once per host per run, across map, sample and scrape
    assert all(r.headers.get("host", "").startswith("127.0.0.1") for r in site.log)


def test_a_spent_budget_ends_the_run_partial_with_every_remaining_url_exhausted(make_deps: Any) -> None:
    docs = {f"/docs/p{i}": Page(article(f"Page {i}", f"/docs/p{i}")) for i in range(8)}
    pages = _site(docs)
    deps = make_deps(run_max_requests=4, host_concurrency=1)
    with TestSite(pages, max_seconds=60) as site:
        pages["/sitemap.xml"] = _sitemap(site.url, list(docs))
        request = new_request(site.url + "/", site_domain="budget.test")
        summary = crawl(deps, request)
    recorded = _outcomes(deps, request.run_id)
    exhausted = [path for path, (outcome, _) in recorded.items() if outcome == "exhausted"]
    fetched = [path for path, (outcome, _) in recorded.items() if outcome == "fetched"]
    assert summary["status"] == "partial"
    assert len(fetched) == 4 and len(exhausted) == 5
    assert all(recorded[p][1] and "budget" in (recorded[p][1] or "") for p in exhausted)
    assert all(outcome is not None for outcome, _ in recorded.values())  # nothing silently dropped
    # Map's walk (the start page) and the sample (one page per section) spent two of the four requests,
    # and scrape used their answers; an exhausted page was never requested. Which pages got the rest is order.
    assert site.requested("/") == site.requested("/docs/p0") == 1 and {"/", "/docs/p0"} <= set(fetched)
    assert all(site.requested(p) == 0 for p in exhausted)


def test_a_second_run_asks_conditionally_and_settles_unchanged_pages_without_a_body(make_deps: Any) -> None:
    docs = {f"/docs/p{i}": Page(article(f"Page {i}", f"/docs/p{i}")) for i in range(3)}
    pages = _site(docs)
    deps = make_deps()
    with TestSite(pages, max_seconds=60) as site:
        pages["/sitemap.xml"] = _sitemap(site.url, list(docs))
        first = new_request(site.url + "/", site_domain="again.test")
        crawl(deps, first)
        before = len(site.log)
        second = new_request(site.url + "/", site_domain="again.test")
        summary = crawl(deps, second)
        later = site.log[before:]
    recorded = _outcomes(deps, second.run_id)
    assert {p: o for p, (o, _) in recorded.items()} == {"/": "not-modified", **{p: "not-modified" for p in docs}}
    assert summary["status"] == "finished" and summary["snapshots"]["unchanged"] == 4
    conditional = [r for r in later if "if-none-match" in r.headers]
    # each page was asked once, conditionally: by map's walk ("/"), the sample ("/docs/p0") or scrape
    assert sorted(r.path for r in conditional) == sorted(["/", *docs])
    assert all(r.headers["if-none-match"] == pages[r.path].etag for r in conditional)


def test_gleaner_runs_shows_the_per_url_breakdown(make_deps: Any, database_url: str, tmp_path: Any) -> None:
    docs = {"/docs/a": Page(article("A", "/docs/a")), "/docs/b": Page(article("B", "b"), status=403)}
    pages = _site(docs)
    deps = make_deps()
    with TestSite(pages, max_seconds=60) as site:
        pages["/sitemap.xml"] = _sitemap(site.url, list(docs))
        request = new_request(site.url + "/", site_domain="cli.test")
        crawl(deps, request)
    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "cli")}
    result = CliRunner().invoke(main, ["runs", request.run_id, "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["outcomes"] == {"denied": 1, "fetched": 2}


def test_a_budget_spent_during_sampling_still_gives_every_url_an_exhausted_status(make_deps: Any) -> None:
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(2.0)  # the run's 1 s budget ends while the sample stage waits for this page

    docs = {"/docs/a-slow": Page("", handler=slow), **{f"/docs/p{i}": Page(article(f"P{i}", str(i))) for i in range(3)}}
    pages = _site(docs)
    deps = make_deps(run_max_seconds=1.0)
    with TestSite(pages, max_seconds=60) as site:
        pages["/sitemap.xml"] = _sitemap(site.url, list(docs))
        request = new_request(site.url + "/", site_domain="late.test")
        summary = crawl(deps, request)
    recorded = _outcomes(deps, request.run_id)
    assert summary["status"] == "partial"
    assert {p: o for p, (o, _) in recorded.items() if p.startswith("/docs")} == {p: "exhausted" for p in docs}
    assert all(site.requested(p) == 0 for p in docs if p != "/docs/a-slow")
    assert site.requested("/docs/a-slow") == 1  # the sample request the budget cut off; never re-asked
