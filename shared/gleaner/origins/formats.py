"""An uploaded file to markdown: which format it is, its ceiling, and its text (pure, no I/O).

Formats and their extractors, each a maintained library or our own page extractor:

- ``pdf``: pypdf (gleaner.extract.pdf), pages as paragraphs;
- ``docx``: python-docx, headings (``Heading N`` styles) as ``#`` lines, list paragraphs as items,
  tables as markdown tables;
- ``html``: trafilatura, as for a scraped page (gleaner.extract.html);
- ``markdown`` and ``text``: the bytes as UTF-8 (anything else is refused, never guessed).

A file that cannot be read raises :class:`UnreadableFile` (its reason says why); one past its
ceiling raises :class:`TooLarge` naming the limit. Both are permanent: the caller answers 413 or
422 and writes nothing.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import version
from pathlib import PurePosixPath

from gleaner.errors import InvalidInput

MB = 1024 * 1024
# seed 004: ingest.max_upload defaults to 200 MB; each format may tighten it.
MAX_UPLOAD_BYTES = 200 * MB


class Format(StrEnum):
    PDF = "pdf"
    DOCX = "docx"
    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"


# Per-format ceilings (seed 004 "per-format size ceilings"): a text format past these is a dump, not a
# document, and its extraction (trafilatura's tree, python-docx's XML) holds several times its size.
CEILINGS: dict[Format, int] = {
    Format.PDF: MAX_UPLOAD_BYTES,
    Format.DOCX: 100 * MB,
    Format.HTML: 20 * MB,
    Format.MARKDOWN: 20 * MB,
    Format.TEXT: 20 * MB,
}

_EXTENSIONS = {
    ".pdf": Format.PDF, ".docx": Format.DOCX, ".html": Format.HTML, ".htm": Format.HTML,
    ".md": Format.MARKDOWN, ".markdown": Format.MARKDOWN, ".txt": Format.TEXT, ".text": Format.TEXT,
}
_MIME = {
    "application/pdf": Format.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": Format.DOCX,
    "text/html": Format.HTML, "application/xhtml+xml": Format.HTML,
    "text/markdown": Format.MARKDOWN, "text/x-markdown": Format.MARKDOWN, "text/plain": Format.TEXT,
}
# Where each format's original is kept: document-snapshots/{doc}/{hash}/original.{ext} (ADR).
ORIGINAL_EXTENSION = {Format.PDF: "pdf", Format.DOCX: "docx", Format.HTML: "html", Format.MARKDOWN: "md",
                      Format.TEXT: "txt"}
MIME_TYPE = {Format.PDF: "application/pdf",
             Format.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
             Format.HTML: "text/html", Format.MARKDOWN: "text/markdown", Format.TEXT: "text/plain"}


class UnreadableFile(InvalidInput):
    """The file is not what it says, or its extractor cannot read it."""


class TooLarge(InvalidInput):
    """The file is past a ceiling; ``limit`` is that ceiling in bytes."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True, slots=True)
class ExtractedFile:
    markdown: str
    title: str | None
    extractor: str


def parse_format(value: str) -> Format:
    """A format named by a caller (``{"format"}``, ``--format``): InvalidInput names the known ones."""
    try:
        return Format(value.lower())
    except ValueError:
        raise InvalidInput(f"format must be one of {', '.join(f.value for f in Format)}, not {value[:40]!r}") from None


def detect_format(name: str | None, content_type: str | None = None, hint: str | None = None) -> Format:
    """The format a hint names, else the file name's extension, else its content type."""
    if hint:
        return parse_format(hint)
    if name:
        found = _EXTENSIONS.get(PurePosixPath(name).suffix.lower())
        if found is not None:
            return found
    if content_type:
        found = _MIME.get(content_type.split(";", 1)[0].strip().lower())
        if found is not None:
            return found
    raise UnreadableFile(f"cannot tell the format of {name or 'the upload'!r}: name it (pdf, docx, html, markdown,"
                         " text) or send a file ending .pdf, .docx, .html, .md or .txt")


def check_ceiling(fmt: Format, size: int, max_upload: int = MAX_UPLOAD_BYTES) -> None:
    """TooLarge when ``size`` passes the upload ceiling or the format's."""
    limit = min(max_upload, CEILINGS[fmt])
    if size > limit:
        which = "an upload" if limit == max_upload else f"a {fmt.value} upload"
        raise TooLarge(f"{which} is limited to {limit} bytes ({limit // MB} MB); this one has {size}", limit)


def extract_file(data: bytes, fmt: Format) -> ExtractedFile:
    """The markdown of one file; UnreadableFile when its extractor cannot read it or it has no text."""
    if fmt is Format.PDF:
        from gleaner.extract.pdf import extract_pdf

        try:
            pdf = extract_pdf(data)
        except InvalidInput as exc:
            raise UnreadableFile(str(exc)) from exc
        found = ExtractedFile(pdf.markdown, pdf.title, pdf.extraction_method)
    elif fmt is Format.DOCX:
        found = _docx(data)
    elif fmt is Format.HTML:
        from gleaner.extract.html import extract_html

        html = _utf8(data, fmt)
        page = extract_html(html)
        found = ExtractedFile(page.content_md or page.raw_md, page.title, page.extractor)
    else:
        text = _utf8(data, fmt).replace("\r\n", "\n").replace("\r", "\n")
        found = ExtractedFile(text, _first_heading(text) if fmt is Format.MARKDOWN else None, f"{fmt.value}-utf8")
    if not found.markdown.strip():
        raise UnreadableFile(f"the {fmt.value} file has no text to keep")
    return found


def _utf8(data: bytes, fmt: Format) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"the {fmt.value} file is not UTF-8 (byte {exc.start}): save it as UTF-8") from None


_HEADING_LINE = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _first_heading(text: str) -> str | None:
    found = _HEADING_LINE.search(text)
    return found.group(1)[:300] if found else None


DOCX_EXTRACTOR = f"python-docx-{version('python-docx')}"
_HEADING_STYLE = re.compile(r"heading\s*([1-6])", re.IGNORECASE)


def _docx(data: bytes) -> ExtractedFile:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UnreadableFile(f"unreadable DOCX: {type(exc).__name__}: {exc}") from None
    blocks: list[str] = []
    title = (document.core_properties.title or "").strip() or None
    # Paragraphs and tables in document order: the body's children, each read by its own proxy.
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for child in document.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(child, document)
            text = paragraph.text.strip()
            if not text:
                continue
            style = (paragraph.style.name if paragraph.style is not None else "") or ""
            heading = _HEADING_STYLE.search(style)
            if heading:
                blocks.append("#" * int(heading.group(1)) + " " + text)
                title = title or text
            elif style.lower() == "title":
                blocks.append("# " + text)
                title = title or text
            elif "list" in style.lower():
                blocks.append("- " + text)
            else:
                blocks.append(text)
        elif tag == "tbl":
            rows = [[" ".join(cell.text.split()).replace("|", "\\|") for cell in row.cells]
                    for row in Table(child, document).rows]
            if rows and any(any(r) for r in rows):
                width = max(len(r) for r in rows)
                lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
                lines.insert(1, "|" + " --- |" * width)
                blocks.append("\n".join(lines))
    markdown = "\n\n".join(blocks)
    return ExtractedFile(markdown + "\n" if markdown else "", title, DOCX_EXTRACTOR)
