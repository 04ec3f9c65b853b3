"""Sitemaps (sitemaps.org 0.9): urlset and sitemap index, plain or gzipped, parsed from bytes.

Parsing is ours rather than ultimate-sitemap-parser's because that library does
its own HTTP; every Gleaner request must go through the one fetcher. The XML
parser resolves no entities, loads no DTD and touches no network, and gzip is
inflated with a hard ceiling, so a hostile sitemap cannot bomb memory.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass

from lxml import etree

from gleaner.errors import InvalidInput

# sitemaps.org: at most 50,000 URLs and 50 MB uncompressed per sitemap.
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
MAX_SITEMAP_URLS = 50_000


@dataclass(frozen=True, slots=True)
class Sitemap:
    kind: str  # "urlset" | "index"
    locs: tuple[str, ...]
    truncated: bool = False
    # <lastmod> of each <loc> as the sitemap wrote it (None where absent): parallel to ``locs``.
    lastmods: tuple[str | None, ...] = ()


def inflate(data: bytes, limit: int = MAX_SITEMAP_BYTES) -> bytes:
    """Gunzip if gzipped, refusing anything that inflates past limit."""
    if not data.startswith(b"\x1f\x8b"):
        return data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = io.BytesIO()
    try:
        chunk = inflater.decompress(data, limit + 1)
        out.write(chunk)
        if out.tell() > limit or inflater.unconsumed_tail:
            raise InvalidInput(f"gzipped sitemap inflates past {limit} bytes")
    except zlib.error as exc:
        raise InvalidInput(f"corrupt gzip sitemap: {exc}") from exc
    return out.getvalue()


def parse_sitemap(data: bytes) -> Sitemap:
    """Parse a sitemap or sitemap index; malformed XML raises InvalidInput."""
    body = inflate(data)
    if len(body) > MAX_SITEMAP_BYTES:
        raise InvalidInput(f"sitemap larger than {MAX_SITEMAP_BYTES} bytes")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                             recover=False)
    try:
        root = etree.parse(io.BytesIO(body.lstrip()), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise InvalidInput(f"malformed sitemap XML: {exc}") from exc
    tag = etree.QName(root).localname.lower()
    if tag == "urlset":
        kind, child = "urlset", "url"
    elif tag == "sitemapindex":
        kind, child = "index", "sitemap"
    else:
        raise InvalidInput(f"not a sitemap: root element <{tag}>")
    locs: list[str] = []
    lastmods: list[str | None] = []
    truncated = False
    for node in root:
        if not isinstance(node.tag, str) or etree.QName(node).localname.lower() != child:
            continue
        loc = lastmod = None
        for sub in node:
            if not isinstance(sub.tag, str) or not sub.text:
                continue
            name = etree.QName(sub).localname.lower()
            if name == "loc" and loc is None:
                loc = sub.text.strip()
            elif name == "lastmod" and lastmod is None:
                lastmod = sub.text.strip()[:64]
        if loc:
            locs.append(loc)
            lastmods.append(lastmod)
        if len(locs) >= MAX_SITEMAP_URLS:
            truncated = True
            break
    return Sitemap(kind, tuple(locs), truncated, tuple(lastmods))

