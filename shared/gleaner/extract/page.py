"""One fetched page, processed where extraction runs: decode, extract, hash, canonicalise.

The extraction processes do every per-page computation that needs only the page,
so the main process (fetching, storage, the bus) does not: decoding the body by
its charset, content.md and raw.md, their SHA1s, and the canonical text with its
BLAKE3 hashes and spans that ingest stores. Bodies go in and come out as bytes:
pickling ``bytes`` through the pool's pipes is a copy, pickling ``str`` is an
encode on one side and a decode on the other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gleaner.extract.html import EXTRACTOR, extract_html
from gleaner.fetch.types import decode_body
from gleaner.provenance.canonical import CanonicalText, bytes_hash, canonicalise


@dataclass(frozen=True, slots=True)
class ExtractedPage:
    content: bytes  # content.md: the main content, or the whole page where none was found
    raw: bytes  # raw.md: the whole page
    content_hash: str  # SHA1(content): the snapshot's identity
    raw_hash: str  # SHA1(raw)
    title: str | None
    canonical: CanonicalText  # what ingest stores for content.md
    extractor: str = EXTRACTOR
    source_blake3: str = ""  # BLAKE3 of the body as fetched (seed 004's content hash)


def extract_page(body: bytes, charset: str | None, url: str) -> ExtractedPage:
    """Everything the pipeline derives from one fetched HTML body, as bytes and hashes."""
    extracted = extract_html(decode_body(body, charset), url)
    # A page where the main-content extractor finds nothing still has a body: the whole page.
    content_md = extracted.content_md or extracted.raw_md
    content = content_md.encode("utf-8")
    raw = content if content_md is extracted.raw_md else extracted.raw_md.encode("utf-8")
    return ExtractedPage(
        content=content, raw=raw, content_hash=hashlib.sha1(content).hexdigest(),
        raw_hash=hashlib.sha1(raw).hexdigest(), title=extracted.title,
        canonical=canonicalise(content, content_md), extractor=extracted.extractor, source_blake3=bytes_hash(body),
    )


def extract_pages(items: list[tuple[bytes, str | None, str]]) -> list[ExtractedPage]:
    """:func:`extract_page` for a few pages at once: (body, charset, url) each, results in order."""
    return [extract_page(body, charset, url) for body, charset, url in items]
