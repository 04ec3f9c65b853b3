"""The map stage reads links from the start page and from pages only links lead to, not from sitemap pages."""

from __future__ import annotations

from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request


def _page(title: str, *links: str) -> Page:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    text = " ".join(["This paragraph holds enough words to count as the main content of a page."] * 8)
    return Page(f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{text}</p>"
                f"<ul>{anchors}</ul></main></body></html>")


def test_listed_pages_are_fetched_once_and_pages_only_links_reach_are_still_found(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update({
            "/": _page("Home", "/docs/index.html"),
            "/docs/index.html": _page("Docs", "/docs/a", "/docs/b", "/docs/unlisted"),
            "/docs/a": _page("A", "/docs/b"),
            "/docs/b": _page("B", "/docs/a"),
            "/docs/unlisted": _page("Unlisted", "/docs/deeper"),
            "/docs/deeper": _page("Deeper"),
            "/robots.txt": Page(f"User-agent: *\nAllow: /\nSitemap: {site.url}/sitemap.xml\n",
                                content_type="text/plain"),
            "/sitemap.xml": Page(
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{site.url}/docs/a</loc></url><url><loc>{site.url}/docs/b</loc></url></urlset>",
                content_type="application/xml"),
        })
        summary = crawl(deps, new_request(site.url + "/", site_domain="walk.test"))

    assert summary["status"] == "finished"
    found = {row["path"] for row in deps.metadata.documents_tree("walk.test")}
    assert {"/", "/docs/index.html", "/docs/a", "/docs/b", "/docs/unlisted", "/docs/deeper"} <= found
    # /docs/a is the section sample; /docs/b only scrape fetched: mapping did not read a page the sitemap listed
    assert site.requested("/docs/b") == 1
    assert site.requested("/docs/unlisted") == 1  # mapping read it for links; scrape used that answer
    assert site.requested("/robots.txt") == 1  # once per host per run, however many stages and batches


def test_a_link_with_an_encoded_nul_in_its_path_is_kept_encoded_and_the_run_goes_on(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update({
            "/": _page("Home", "/docs/a", "/docs/bad%00name", "/docs/ctl%01x"),
            "/docs/a": _page("A"),
        })
        summary = crawl(deps, new_request(site.url + "/", site_domain="nul.test"))

    assert summary["status"] == "finished"
    assert summary["fetched"] >= 2
    paths = {row["path"] for row in deps.metadata.documents_tree("nul.test")}
    assert {"/", "/docs/a", "/docs/bad%00name", "/docs/ctl%01x"} <= paths
    urls = {u["url"]: u["status"] for u in deps.metadata.run_urls(summary["run_id"])}
    assert urls[site.url + "/docs/bad%00name"]  # the odd URL has a status of its own, like every URL


def test_a_walk_past_its_soft_deadline_stops_and_the_run_goes_on_with_what_it_found(make_deps):
    """In the cloud map is killed at its timeout and redelivered from the start; a walk that cannot fit
    must end on its own (GLEANER_MAP_SOFT_DEADLINE), crawl what it found, and declare nothing gone."""
    deps = make_deps(map_soft_deadline=0.001)  # past as soon as the start page is read
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update({
            "/": _page("Home", "/docs/index.html"),
            "/docs/index.html": _page("Docs", "/docs/a"),
            "/docs/a": _page("A"),
        })
        summary = crawl(deps, new_request(site.url + "/", site_domain="deadline.test"))
        assert site.requested("/docs/a") == 0  # the second level was never walked

    assert summary["status"] == "finished"
    found = {row["path"] for row in deps.metadata.documents_tree("deadline.test")}
    assert {"/", "/docs/index.html"} <= found and "/docs/a" not in found
