"""PDF to markdown-ish text with pypdf: pure, from bytes to text, no network.

A PDF's text layer has no reliable structure, so pages become paragraphs
separated by blank lines; the title comes from the document information. Broken,
encrypted or oversized PDFs raise InvalidInput (a permanent refusal for that URL).
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from importlib.metadata import version

from gleaner.errors import InvalidInput

# pypdf is imported where a PDF is read (most crawls read none), as trafilatura is in extract/html.py.
EXTRACTION_METHOD = f"pypdf-{version('pypdf')}"
# A report is tens of pages; a thousand pages is a book and costs seconds of CPU per page range.
MAX_PDF_PAGES = 1000
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True, slots=True)
class PdfText:
    markdown: str
    title: str | None
    pages: int
    extraction_method: str = EXTRACTION_METHOD


def is_pdf(data: bytes) -> bool:
    """The PDF magic number within the first KiB (the spec allows leading junk)."""
    return b"%PDF-" in data[:1024]


def extract_pdf(data: bytes) -> PdfText:
    """The text of every page, pages separated by blank lines."""
    if not is_pdf(data):
        raise InvalidInput("not a PDF (no %PDF- header)")
    import pypdf
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # pypdf warns loudly about every sloppy xref
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise InvalidInput("the PDF is encrypted")
        count = len(reader.pages)
        if count > MAX_PDF_PAGES:
            raise InvalidInput(f"the PDF has {count} pages, more than {MAX_PDF_PAGES}")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        info = reader.metadata
        title = str(info.title).strip() if info is not None and info.title else None
    except InvalidInput:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InvalidInput(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc
    text = "\n\n".join(p for p in pages if p)
    text = _BLANK_RUNS.sub("\n\n", text.replace("\r\n", "\n")).strip()
    return PdfText(text + "\n" if text else "", title or None, count)
