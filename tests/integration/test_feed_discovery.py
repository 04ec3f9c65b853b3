"""Feeds as a discovery source of a crawl: named feeds, announced feeds, and broken ones as recorded problems."""

from __future__ import annotations

import json

import sqlalchemy as sa

from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from tests.feed_site import feed_pages


def discovered(deps, run_id):
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT d.path, c.discovered_via FROM knowledge.crawl_page_decisions c"
            " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r ORDER BY d.path"),
            {"r": run_id}).all()
    return {path: via for path, via in rows}


def map_problems(deps, run_id, site_domain):
    key = f"domains/{site_domain}/runs/{run_id}/map/links.json"
    return json.loads(deps.blobs.get(key))["problems"]


def test_entries_of_named_and_announced_feeds_become_documents(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(feed_pages(site.url))
        request = new_request(site.url + "/", site_domain="news.test",
                              feeds=(site.url + "/feeds/rss2.xml", site.url + "/feeds/rss1.rdf"))
        summary = crawl(deps, request)
    found = discovered(deps, request.run_id)
    # /articles/* are linked from no page: only the feeds (RSS 2.0, RSS 1.0, and the Atom feed the
    # home page announces with <link rel="alternate">) know them.
    assert found["/articles/sea-ice"] == "feed"
    assert found["/articles/solar-cells"] == "feed"
    assert found["/articles/tidal-power"] == "feed"
    assert "/feeds/rss2.xml" not in found  # a feed is a source of URLs, not a document
    assert summary["status"] == "finished"
    assert site.requested("/feeds/atom.xml") == 1


def test_broken_and_hostile_feeds_are_recorded_problems_and_the_run_goes_on(deps):
    pages: dict[str, Page] = {}
    names = ("bad.xml", "latin1.xml", "bomb.xml", "huge.xml", "not-a-feed.xml", "missing.xml")
    with TestSite(pages, max_seconds=60) as site:
        pages.update(feed_pages(site.url))
        request = new_request(site.url + "/about", site_domain="broken.test",
                              feeds=(*(f"{site.url}/feeds/{n}" for n in names), "ftp://x.test/feed"))
        summary = crawl(deps, request)
    assert summary["status"] == "finished"
    problems = "\n".join(map_problems(deps, request.run_id, "broken.test"))
    assert "bad.xml: feed is not well-formed" in problems
    assert "latin1.xml: feed is not well-formed" in problems
    assert "bomb.xml: feed declares XML entities" in problems
    assert "huge.xml: feed is" in problems and "cap" in problems
    assert "not-a-feed.xml: not an RSS or Atom feed" in problems
    assert "missing.xml: unavailable HTTP 404" in problems
    assert "invalid feed URL" in problems
    found = discovered(deps, request.run_id)
    assert found["/articles/sea-ice"] == "feed"  # what the broken feeds did yield is kept
    assert not any(path.startswith("/filler/") for path in found)


def test_feed_entries_on_other_hosts_are_not_part_of_the_run(deps):
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(feed_pages(site.url))
        pages["/feeds/elsewhere.xml"] = Page(
            "<rss version='2.0'><channel><title>x</title><item><title>a</title>"
            "<link>https://other.example/post</link></item></channel></rss>", content_type="application/rss+xml")
        request = new_request(site.url + "/about", site_domain="elsewhere.test",
                              feeds=(site.url + "/feeds/elsewhere.xml",))
        crawl(deps, request)
    problems = map_problems(deps, request.run_id, "elsewhere.test")
    assert any("1 entries link to other hosts" in p for p in problems)


def test_gleaner_crawl_with_only_a_feed_crawls_the_feed_entries(database_url, tmp_path):
    from click.testing import CliRunner

    from gleaner.cli import main

    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(feed_pages(site.url))
        env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "g"),
               "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": "0", "GLEANER_EXTRACT_WORKERS": "1"}
        result = CliRunner().invoke(main, ["crawl", "--feed", site.url + "/feeds/rss1.rdf", "--json"], env=env)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished"
    assert summary["discovered"] == 3  # the root page and the feed's two articles; no links followed
    assert site.requested("/articles/tidal-power") == 1
    assert site.requested("/about") == 0
