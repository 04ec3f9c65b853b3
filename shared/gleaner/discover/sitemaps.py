"""Sitemaps (sitemaps.org 0.9): urlset and sitemap index, plain or gzipped, read as a stream.

Parsing is ours rather than ultimate-sitemap-parser's because that library does
its own HTTP; every Gleaner request must go through the one fetcher. The XML
parser resolves no entities, loads no DTD and touches no network.

A sitemap is read incrementally: gzip is inflated a chunk at a time, the chunks
feed a pull parser, and each ``<url>`` element is dropped once its ``<loc>`` is
yielded, so memory stays flat however large the sitemap and the caller stops
reading the moment it has enough (the run's limit). The sitemaps.org caps bound
one sitemap: past 50,000 URLs the rest is ignored (``truncated``), and more than
50 MB of XML is refused, so a gzip bomb is stopped as it inflates.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from lxml import etree

from gleaner.errors import InvalidInput
from gleaner.fetch.body import BodyRefused, Decoder

# sitemaps.org: at most 50,000 URLs and 50 MB uncompressed per sitemap.
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
MAX_SITEMAP_URLS = 50_000
# Bytes handed to the parser at once: small enough that stopping early wastes little work.
CHUNK = 64 * 1024
# Compressed bytes per Decoder feed: at gzip's ~1000:1 worst case, at most a few MB inflate at once.
GZIP_CHUNK = 4 * 1024


@dataclass(frozen=True, slots=True)
class Sitemap:
    kind: str  # "urlset" | "index"
    locs: tuple[str, ...]
    truncated: bool = False
    # <lastmod> of each <loc> as the sitemap wrote it (None where absent): parallel to ``locs``.
    lastmods: tuple[str | None, ...] = ()


@dataclass
class SitemapStream:
    """``kind`` is known once the root element was read; iterate for (``<loc>``, ``<lastmod>`` or None) in order.

    Iteration raises InvalidInput on malformed XML or a gzip bomb (the locations before it were yielded).
    """

    data: bytes
    max_urls: int = MAX_SITEMAP_URLS
    max_bytes: int = MAX_SITEMAP_BYTES
    kind: str = ""
    truncated: bool = False
    _events: Iterator[tuple[str, str | None]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._events = self._locations()
        first = next(self._events, None)
        if first is None:
            raise InvalidInput("empty sitemap")
        self._first: tuple[str, str | None] | None = first

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        if self._first is not None and self._first[0]:
            yield self._first
        self._first = None
        yield from self._events

    def _locations(self) -> Iterator[tuple[str, str | None]]:
        """("", None) once the root is known (kind set), then (loc, lastmod) per entry."""
        parser = etree.XMLPullParser(events=("start", "end"), resolve_entities=False, no_network=True,
                                     load_dtd=False, huge_tree=False, recover=False)
        child = ""
        in_entry = False
        count = 0
        loc: str | None = None
        lastmod: str | None = None
        for chunk in _inflated(self.data, self.max_bytes):
            try:
                parser.feed(chunk)
                events = list(parser.read_events())
            except etree.XMLSyntaxError as exc:
                raise InvalidInput(f"malformed sitemap XML: {exc}") from exc
            for event, node in events:
                if not isinstance(node.tag, str):
                    continue
                name = etree.QName(node).localname.lower()
                if not self.kind:
                    if name == "urlset":
                        self.kind, child = "urlset", "url"
                    elif name == "sitemapindex":
                        self.kind, child = "index", "sitemap"
                    else:
                        raise InvalidInput(f"not a sitemap: root element <{name}>")
                    yield "", None
                    continue
                if name == child:
                    in_entry = event == "start"
                    if event == "start":
                        loc = lastmod = None
                        continue
                    # Drop the finished entry and any siblings before it: memory stays flat.
                    node.clear()
                    parent = node.getparent()
                    if parent is not None:
                        while node.getprevious() is not None:
                            del parent[0]
                    if loc:
                        count += 1
                        if count > self.max_urls:
                            self.truncated = True
                            return
                        yield loc, lastmod
                elif event == "end" and in_entry and node.text and node.text.strip():
                    if name == "loc" and loc is None:
                        loc = node.text.strip()
                    elif name == "lastmod" and lastmod is None:
                        lastmod = node.text.strip()[:64]
        try:
            parser.close()
        except etree.XMLSyntaxError as exc:
            raise InvalidInput(f"malformed sitemap XML: {exc}") from exc


def _inflated(data: bytes, limit: int) -> Iterator[bytes]:
    """The sitemap's XML in chunks: gunzipped if gzipped, leading whitespace dropped, refused past ``limit``."""
    if not data.startswith(b"\x1f\x8b"):
        body = data.lstrip()
        if len(body) > limit:
            raise InvalidInput(f"sitemap larger than {limit} bytes")
        for start in range(0, len(body), CHUNK):
            yield body[start:start + CHUNK]
        return
    # The fetcher's bounded Decoder, fed a few KiB of compressed bytes at a time: each feed's output is
    # bounded by what is left of the limit, so a bomb is refused as it inflates and memory stays flat.
    decoder = Decoder("gzip")
    total = 0
    first = True
    try:
        parts = (data[start:start + GZIP_CHUNK] for start in range(0, len(data), GZIP_CHUNK))
        for part in (*parts, None):
            out = decoder.feed(part, limit - total) if part is not None else decoder.finish(limit - total)
            total += len(out)
            if first:
                out = out.lstrip()
                first = not out
            if out:
                yield out
    except BodyRefused as exc:
        if exc.kind == "size":
            raise InvalidInput(f"gzipped sitemap inflates past {limit} bytes") from exc
        raise InvalidInput(f"corrupt gzip sitemap: {exc.reason}") from exc


def parse_sitemap(data: bytes) -> Sitemap:
    """A whole (small) sitemap at once; malformed XML raises InvalidInput. Map reads sitemaps as streams."""
    stream = SitemapStream(data)
    entries = list(stream)
    return Sitemap(stream.kind, tuple(loc for loc, _ in entries), stream.truncated,
                   tuple(lastmod for _, lastmod in entries))
