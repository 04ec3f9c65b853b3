"""Recrawls version exactly what changed, and a page that changes back points at its earlier snapshot."""

from __future__ import annotations

from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.runtime.runner import crawl, new_request


def test_changed_pages_get_a_new_version_and_a_reverted_page_its_old_snapshot_again(deps):
    pages = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        first = crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
        doc = deps.metadata.document_by_url(site.url + "/docs/install")
        v1 = doc["current_snapshot_id"]

        for path, page in demo_pages(site.url, changed=("/docs/install", "/about")).items():
            page.modified += 60
            pages[path] = page
        second = crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
        v2 = deps.metadata.document_by_url(site.url + "/docs/install")["current_snapshot_id"]

        for path, page in demo_pages(site.url).items():
            page.modified += 120
            pages[path] = page
        third = crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
        back = deps.metadata.document_by_url(site.url + "/docs/install")["current_snapshot_id"]

    assert first["snapshots"]["new"] == first["fetched"]
    assert second["snapshots"] == {"new": 0, "changed": 2, "unchanged": first["fetched"] - 2}
    assert v2 != v1
    assert third["snapshots"]["changed"] == 2
    assert back == v1
    assert [v["version"] for v in deps.metadata.snapshots_of(doc["id"])] == [2, 1]
