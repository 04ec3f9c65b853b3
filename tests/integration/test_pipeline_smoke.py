"""A first whole crawl of the demo site on a real PostgreSQL and a loopback site."""

from __future__ import annotations

from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.runtime.runner import crawl, new_request


def test_a_crawl_of_the_demo_site_lands_snapshots_for_the_included_pages(deps):
    pages = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(demo_pages(site.url))
        summary = crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
    assert summary["status"] == "finished"
    assert summary["snapshots"]["new"] == summary["fetched"] > 10
    assert site.requested("/private/roadmap") == 0
