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

from gleaner.errors import InvalidInput
from gleaner.extract.html import EXTRACTOR, Extracted, extract_html
from gleaner.extract.pdf import extract_pdf
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
    mime_type: str = "text/html"  # what was extracted: HTML, or a document (application/pdf)
    refused: str | None = None  # why nothing could be extracted (an unreadable PDF): refused-content


PDF = "application/pdf"


def extract_page(body: bytes, charset: str | None, url: str, content_type: str | None = None) -> ExtractedPage:
    """Everything the pipeline derives from one fetched body (HTML, or a PDF), as bytes and hashes."""
    if content_type == PDF:
        return extract_document(body)
    extracted = extract_body(body, charset, url)
    # A page where the main-content extractor finds nothing still has a body: the whole page.
    content_md = extracted.content_md or extracted.raw_md
    content = content_md.encode("utf-8")
    raw = content if content_md is extracted.raw_md else extracted.raw_md.encode("utf-8")
    return ExtractedPage(
        content=content, raw=raw, content_hash=hashlib.sha1(content).hexdigest(),
        raw_hash=hashlib.sha1(raw).hexdigest(), title=extracted.title,
        canonical=canonicalise(content, content_md), extractor=extracted.extractor, source_blake3=bytes_hash(body),
    )


def extract_document(body: bytes) -> ExtractedPage:
    """A PDF as a page: pypdf's text is both content.md and raw.md (a text layer has no page around it)."""
    try:
        pdf = extract_pdf(body)
        if not pdf.markdown.strip():
            raise InvalidInput("the PDF has no text layer")
    except InvalidInput as exc:
        return ExtractedPage(content=b"", raw=b"", content_hash="", raw_hash="", title=None,
                             canonical=canonicalise(b"", ""), extractor="", mime_type=PDF, refused=str(exc))
    content = pdf.markdown.encode("utf-8")
    digest = hashlib.sha1(content).hexdigest()
    return ExtractedPage(content=content, raw=content, content_hash=digest, raw_hash=digest, title=pdf.title,
                         canonical=canonicalise(content, pdf.markdown), extractor=pdf.extraction_method,
                         source_blake3=bytes_hash(body), mime_type=PDF)


def extract_pages(items: list[tuple[bytes, str | None, str, str | None]]) -> list[ExtractedPage]:
    """:func:`extract_page` for a few pages at once: (body, charset, url, content type) each, in order."""
    return [extract_page(body, charset, url, content_type) for body, charset, url, content_type in items]


def extract_body(body: bytes, charset: str | None, url: str) -> Extracted:
    """One HTML body's content.md, raw.md and title, decoded by its charset (what sample decides on)."""
    return extract_html(decode_body(body, charset), url)
