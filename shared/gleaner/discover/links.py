"""Links and feed references in an HTML page: pure, from text to canonical URLs."""

from __future__ import annotations

from dataclasses import dataclass

from lxml import html as lxml_html
from lxml.etree import ParserError

from gleaner.urls import absolutize

_FEED_TYPES = {"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+json"}


@dataclass(frozen=True, slots=True)
class PageLinks:
    """Links as absolute URLs (what to fetch; canonicalise for identity), in document order."""

    links: tuple[str, ...]
    feeds: tuple[str, ...]
    nofollow: bool = False


def extract_links(html: str, base_url: str) -> PageLinks:
    """Absolute http(s) links in document order (deduplicated), and alternate feed links."""
    try:
        tree = lxml_html.fromstring(html) if html.strip() else None
    except (ParserError, ValueError):
        tree = None
    if tree is None:
        return PageLinks((), ())
    base = base_url
    base_node = tree.find(".//base[@href]")
    if base_node is not None:
        resolved = absolutize(base_url, base_node.get("href", ""))
        if resolved:
            base = resolved
    nofollow = False
    for meta in tree.iter("meta"):
        name = (meta.get("name") or "").lower()
        if name in ("robots", "gleaner") and "nofollow" in (meta.get("content") or "").lower():
            nofollow = True
    links: dict[str, None] = {}
    if not nofollow:
        for anchor in tree.iter("a"):
            href = anchor.get("href")
            if not href or "nofollow" in (anchor.get("rel") or "").lower():
                continue
            url = absolutize(base, href)
            if url:
                links.setdefault(url, None)
    feeds: dict[str, None] = {}
    for link in tree.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        if "alternate" in rel and (link.get("type") or "").lower().split(";")[0].strip() in _FEED_TYPES:
            url = absolutize(base, link.get("href") or "")
            if url:
                feeds.setdefault(url, None)
    return PageLinks(tuple(links), tuple(feeds), nofollow)
