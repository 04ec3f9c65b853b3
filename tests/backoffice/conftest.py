"""The back office tests' kept site: the demo site crawled twice (one page changed), served by `gleaner serve`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest

from gleaner.app import Deps
from gleaner.demo import demo_pages
from gleaner.runner import crawl, new_request
from gleaner.serve import WebhookServer
from gleaner.testsite import TestSite

SITE = "demo.test"
CHANGED = "/docs/install"


@dataclass
class Kept:
    deps: Deps
    site: TestSite
    server: WebhookServer
    first: dict[str, Any]
    second: dict[str, Any]

    @property
    def url(self) -> str:
        return self.server.url

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params, timeout=10)

    def document_id(self, path: str) -> str:
        doc = self.deps.metadata.document_by_url(self.site.url + path)
        assert doc is not None
        return str(doc["id"])

    def recrawl(self, *changed: str, copies: dict[str, str] | None = None) -> dict[str, Any]:
        """Crawl again, after giving ``changed`` paths new text (CHANGED keeps its second version) and
        making each key of ``copies`` serve the same page as its value (a duplicate)."""
        pages = demo_pages(self.site.url, changed=(CHANGED, *changed))
        for path, source in (copies or {}).items():
            pages[path] = replace(pages[source])
        for path, page in pages.items():
            page.modified += 120
            self.site.pages[path] = page
        return crawl(self.deps, new_request(self.site.url + "/", site_domain=SITE))


@pytest.fixture
def kept(make_deps: Any) -> Iterator[Kept]:
    # Deliveries to a dead target fail at once instead of retrying for the run's notification wait.
    deps = make_deps(webhook_secret="admin-secret", notify_run_wait=0.0, notify_max_attempts=1, notify_timeout=2.0)
    pages: dict[str, Any] = {}
    with TestSite(pages, max_seconds=300) as site:
        pages.update(demo_pages(site.url))
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        for path, page in demo_pages(site.url, changed=(CHANGED,)).items():
            page.modified += 60
            pages[path] = page
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        with WebhookServer(deps, port=0) as server:
            yield Kept(deps, site, server, first, second)
