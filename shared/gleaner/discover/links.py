"""Links and feed references in an HTML page: pure, from text to canonical URLs."""

from __future__ import annotations

from dataclasses import dataclass

from lxml import html as lxml_html
from lxml.etree import ParserError

from gleaner.urls import resolve

_FEED_TYPES = {"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+json"}


@dataclass(frozen=True, slots=True)
class PageLinks:
    links: tuple[str, ...]
    feeds: tuple[str, ...]
    nofollow: bool = False


def extract_links(html: str, base_url: str) -> PageLinks:
    """Canonical http(s) links in document order (deduplicated), and alternate feed links."""
    try:
        tree = lxml_html.fromstring(html) if html.strip() else None
    except (ParserError, ValueError):
        tree = None
    if tree is None:
        return PageLinks((), ())
    base = base_url
    base_node = tree.find(".//base[@href]")
    if base_node is not None:
        resolved = resolve(base_url, base_node.get("href", ""))
        if resolved:
            base = resolved
    nofollow = False
    for meta in tree.iter("meta"):
        if (meta.get("name") or "").lower() in ("robots", "gleaner") and "nofollow" in (meta.get("content") or "").lower():
            nofollow = True
    links: dict[str, None] = {}
    if not nofollow:
        for anchor in tree.iter("a"):
            href = anchor.get("href")
            if not href or "nofollow" in (anchor.get("rel") or "").lower():
                continue
            url = resolve(base, href)
            if url:
                links.setdefault(url, None)
    feeds: dict[str, None] = {}
    for link in tree.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        if "alternate" in rel and (link.get("type") or "").lower().split(";")[0].strip() in _FEED_TYPES:
            url = resolve(base, link.get("href") or "")
            if url:
                feeds.setdefault(url, None)
    return PageLinks(tuple(links), tuple(feeds), nofollow)
