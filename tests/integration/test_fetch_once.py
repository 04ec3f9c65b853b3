"""At most one request per URL per run (robots.txt and sitemaps aside), first crawl and recrawl alike.

The site has no sitemap, so map's link walk reads every page it reaches and sample
samples some of them: scrape must use those answers instead of asking again, and
an unchanged recrawl must be answered by conditional requests alone.
"""

from __future__ import annotations

from collections import Counter

from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request

from .db_helpers import rows
from .sites import demo_site

SITE = "once.test"
ASIDE = {"/robots.txt", "/sitemap.xml"}


def without_sitemaps(site: TestSite) -> None:
    for path in [p for p in site.pages if "sitemap" in p]:
        del site.pages[path]
    site.pages["/robots.txt"] = Page("User-agent: *\nDisallow: /private/\n", content_type="text/plain")


def requests_of(site: TestSite, start: int, stop: int | None = None) -> list[tuple[str, dict[str, str]]]:
    return [(r.path, r.headers) for r in site.log[start:stop] if r.path not in ASIDE]


def test_a_site_without_a_sitemap_is_asked_once_per_url_and_an_unchanged_recrawl_only_conditionally(deps):
    with demo_site() as site:
        without_sitemaps(site)
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        mark = len(site.log)
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        first_requests, second_requests = requests_of(site, 0, mark), requests_of(site, mark)

    assert first["status"] == second["status"] == "finished"
    assert first["fetched"] >= 10 and first["snapshots"]["new"] == first["fetched"]
    twice = {path: n for path, n in Counter(path for path, _ in first_requests).items() if n > 1}
    assert twice == {}, f"asked more than once in the first crawl: {twice}"
    twice = {path: n for path, n in Counter(path for path, _ in second_requests).items() if n > 1}
    assert twice == {}, f"asked more than once in the recrawl: {twice}"
    # Feeds are read whole each run, like sitemaps: they are where new URLs come from, not pages.
    unconditional = [path for path, headers in second_requests if path != "/feed.xml"
                     and "if-none-match" not in headers and "if-modified-since" not in headers]
    assert unconditional == []
    assert second["not_modified"] == first["fetched"] and second["fetched"] == 0
    assert second["snapshots"] == {"new": 0, "changed": 0, "unchanged": first["fetched"]}



def test_a_kept_body_that_expired_before_scrape_is_asked_for_again_not_lost(deps):
    from gleaner.stages import map as map_stage
    from gleaner.stages import wire

    with demo_site() as site:
        without_sitemaps(site)
        request = new_request(site.url + "/", site_domain=SITE)
        wire(deps.bus, deps)
        map_stage.handle(request, deps)  # map only: its crawl-mapped message waits on the bus
        bodies = deps.blobs.root / f"domains/{SITE}/runs/{request.run_id}/bodies"
        expired = sorted(path.name for path in bodies.iterdir())
        for path in bodies.iterdir():  # run artefacts may expire before scrape runs
            path.unlink()
        mark = len(site.log)
        deps.bus.drain()
        asked_again = {r.path for r in site.log[mark:]}
        summary = deps.metadata.run_summary(request.run_id)
    assert len(expired) >= 5
    assert summary["status"] == "finished" and summary["snapshots"]["new"] == summary["fetched"] >= 10
    assert "/" in asked_again  # the start page's kept body was gone: scrape asked for it rather than lose it



def test_a_page_whose_scrape_failed_is_asked_for_once_by_the_next_run_and_stored(deps):
    from gleaner.stages import map as map_stage
    from gleaner.stages import wire
    from gleaner.urls import canonicalize, url_hash

    with demo_site() as site:
        without_sitemaps(site)
        about, healthy = site.url + "/about", site.pages["/about"]
        first = new_request(site.url + "/", site_domain=SITE)
        wire(deps.bus, deps)
        map_stage.handle(first, deps)  # the walk reads /about: its links and validators are kept
        (deps.blobs.root / f"domains/{SITE}/runs/{first.run_id}/bodies/{url_hash(canonicalize(about))}").unlink()
        site.pages["/about"] = Page("down", status=500)  # and scrape's own request for it fails
        deps.bus.drain()
        stored_first = stored(deps)
        site.pages["/about"] = healthy
        mark = len(site.log)
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        asked = [headers for path, headers in requests_of(site, mark) if path == "/about"]
    assert stored_first == [(False,)]
    assert second["status"] == "finished"
    # One request, unconditional: a 304 to the walk would leave scrape nothing to store.
    assert len(asked) == 1 and "if-none-match" not in asked[0]
    assert stored(deps) == [(True,)]


def stored(deps) -> list[tuple[bool]]:
    """Whether /about has a current snapshot."""
    return [tuple(r) for r in rows(deps, "SELECT current_snapshot_id IS NOT NULL FROM knowledge.documents"
                                         " WHERE site_domain = :s AND path = '/about'", s=SITE)]


HUB = ("<!doctype html><html><head><title>Demo Co</title></head><body><nav><a href=/docs/getting-started>Docs</a>"
       " <a href=/blog>Blog</a> <a href=/about>About</a></nav><main><h1>Demo Co</h1></main></body></html>")


def home_decision(deps, run_id):
    """(decision, the run its verdict was decided in) of the start page in ``run_id``."""
    [(decision, metadata)] = rows(
        deps, "SELECT c.decision::text, c.decision_metadata FROM knowledge.crawl_page_decisions c"
              " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r AND d.path = '/'", r=run_id)
    return decision, metadata.get("sample", {}).get("decided_in_run")


def test_an_unchanged_recrawl_asks_an_excluded_hub_page_only_conditionally_and_reuses_its_verdict(deps):
    with demo_site(**{"/": Page(HUB)}) as site:
        without_sitemaps(site)
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        mark = len(site.log)
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        second_requests = requests_of(site, mark)
    assert first["status"] == second["status"] == "finished"
    # The hub is excluded (near-empty main text), so it has no snapshot whose validators the walk could use.
    assert home_decision(deps, first["run_id"]) == ("exclude", first["run_id"])
    asked_home = [headers for path, headers in second_requests if path == "/"]
    assert len(asked_home) == 1 and "if-none-match" in asked_home[0]
    unconditional = [path for path, headers in second_requests if path != "/feed.xml"
                     and "if-none-match" not in headers and "if-modified-since" not in headers]
    assert unconditional == []
    # Its 304 carries the first run's verdict over: the page is not extracted again.
    assert home_decision(deps, second["run_id"]) == ("exclude", first["run_id"])
    assert second["fetched"] == 0 and second["snapshots"] == {"new": 0, "changed": 0, "unchanged": first["fetched"]}
