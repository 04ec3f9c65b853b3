"""Loopback sites for the pipeline tests, built on the bundled demo site."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite


@contextmanager
def demo_site(**changes: Page) -> Iterator[TestSite]:
    """The demo site with optional page overrides (path -> Page); pages can be swapped while it runs."""
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        pages.update(changes)
        yield site


def set_version(site: TestSite, *changed: str) -> None:
    """Rewrite the given paths' text (a new version of those pages), keep the rest byte-identical."""
    site.pages.update(demo_pages(site.url, changed=changed))
