"""Links and feed references in an HTML page: pure, from text to absolute URLs.

Besides ``<a href>``, documentation generators link pages by ``<iframe src>`` / ``<frame src>`` (mdBook's
``<noscript><iframe src="toc.html">``, Javadoc's frames) and chain them by ``rel="next|prev"`` on ``<link>``
and ``<a>``: those chained pages come back apart (``chain``), for the walk to follow without spending depth.

The page is read as a stream (lxml's pull parser, elements dropped once read), not
built into a tree, and reading stops at ``max_links``: a hostile page of a
hundred thousand links costs neither a tree of them nor a list past the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from gleaner.urls import absolutize

_FEED_TYPES = {"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+json"}
# Characters handed to the parser at once (a page stops being read once it has given enough links).
_CHUNK = 64 * 1024
# rel values that chain a page to its neighbours in reading order (HTML's next / prev; "previous" is old).
_CHAINED = frozenset({"next", "prev", "previous"})
# Default cap on links read from one page; the map stage passes the configured one (Settings).
MAX_LINKS_PER_PAGE = 5000


@dataclass(frozen=True, slots=True)
class PageLinks:
    """Links as absolute URLs (what to fetch; canonicalise for identity), in document order."""

    links: tuple[str, ...]
    feeds: tuple[str, ...]
    nofollow: bool = False
    truncated: bool = False  # the page had more links than were read
    chain: tuple[str, ...] = ()  # rel next / prev: the page's neighbours in a reading order (also in links)


def extract_links(html: str, base_url: str, max_links: int = MAX_LINKS_PER_PAGE) -> PageLinks:
    """Absolute http(s) links in document order (deduplicated, at most ``max_links``), and alternate feeds."""
    if not html.strip():
        return PageLinks((), ())
    parser = etree.HTMLPullParser(events=("start", "end"), recover=True, no_network=True,
                                  remove_comments=True, remove_pis=True)
    base = base_url
    nofollow = False
    truncated = False
    links: dict[str, None] = {}
    feeds: dict[str, None] = {}
    chain: dict[str, None] = {}
    for start in range(0, len(html), _CHUNK):
        try:
            parser.feed(html[start:start + _CHUNK])
            events = list(parser.read_events())
        except (etree.ParserError, ValueError):
            break
        for event, node in events:
            tag = node.tag if isinstance(node.tag, str) else ""
            if event == "end":
                if tag not in ("html", "head", "body"):
                    _drop(node)
                continue
            if tag in ("a", "iframe", "frame"):
                rel = (node.get("rel") or "").lower().split()
                href = node.get("href") if tag == "a" else node.get("src")
                if href and "nofollow" not in rel:
                    url = absolutize(base, href)
                    if url:
                        links.setdefault(url, None)
                        if _CHAINED & set(rel):
                            chain.setdefault(url, None)
                        if len(links) >= max_links:
                            truncated = True
                            break
            elif tag == "base" and base is base_url and node.get("href"):
                base = absolutize(base_url, node.get("href", "")) or base_url
            elif tag == "meta":
                name = (node.get("name") or "").lower()
                if name in ("robots", "gleaner") and "nofollow" in (node.get("content") or "").lower():
                    nofollow = True
            elif tag == "link":
                rel = (node.get("rel") or "").lower().split()
                kind = (node.get("type") or "").lower().split(";")[0].strip()
                if "alternate" in rel and kind in _FEED_TYPES:
                    url = absolutize(base, node.get("href") or "")
                    if url:
                        feeds.setdefault(url, None)
                elif _CHAINED & set(rel) and len(links) < max_links:
                    url = absolutize(base, node.get("href") or "")
                    if url:
                        links.setdefault(url, None)
                        chain.setdefault(url, None)
        if truncated:
            break
    return PageLinks(() if nofollow else tuple(links), tuple(feeds), nofollow, truncated and not nofollow,
                     () if nofollow else tuple(chain))


def _drop(node: etree._Element) -> None:
    """Forget a finished element and the siblings before it: the stream keeps no tree."""
    node.clear(keep_tail=False)
    parent = node.getparent()
    if parent is not None:
        while node.getprevious() is not None:
            del parent[0]
