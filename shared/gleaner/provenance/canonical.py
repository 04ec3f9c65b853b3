"""Canonical text and its span ledger (seed 004): pure functions of strings.

Canonical text is Unicode NFC with LF line endings, addressed by its BLAKE3 hash.
A span is a half-open byte range [start, end) into the UTF-8 bytes of the
canonical text, one per markdown block (heading, paragraph, list item, table,
code block), with its kind. Bytes are forever; tokens and lines are not.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

import blake3

_HEADING = re.compile(r"^#{1,6}\s")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+")
_FENCE = re.compile(r"^(```|~~~)")


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    kind: str  # heading | paragraph | list_item | table | code


@dataclass(frozen=True, slots=True)
class CanonicalText:
    """What ingest stores for one body: its canonical text, both BLAKE3 hashes and the span ledger."""

    source_blake3: str  # BLAKE3 of the body's bytes (content.md)
    text_hash: str  # BLAKE3 of the canonical text's UTF-8 bytes
    text: bytes  # the canonical text, UTF-8 (the body itself when canonicalising changed nothing)
    spans_json: str  # the spans as a JSON array of [start, end, kind]: the form the database takes

    def spans(self) -> list[Span]:
        return [Span(start, end, kind) for start, end, kind in json.loads(self.spans_json)]


def canonicalise(source: bytes, decoded: str | None = None) -> CanonicalText:
    """Canonical text, hashes and spans of a body.

    ``decoded``, when the caller has it, is ``source`` as text (``source == decoded.encode()``):
    a body already canonical is then not encoded again, and pickles once with the body.
    """
    text = canonical_text(source.decode("utf-8", errors="replace") if decoded is None else decoded)
    encoded = source if decoded is not None and text == decoded else text.encode("utf-8")
    return CanonicalText(
        source_blake3=bytes_hash(source),
        text_hash=bytes_hash(encoded),
        text=encoded,
        spans_json=json.dumps([[s.start, s.end, s.kind] for s in spans_of(text)], separators=(",", ":")),
    )


def canonical_text(markdown: str) -> str:
    """NFC, LF-only, no trailing whitespace at the end of the text."""
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    return text.rstrip() + "\n" if text.strip() else ""


def text_hash(text: str) -> str:
    return blake3.blake3(text.encode("utf-8")).hexdigest()


def bytes_hash(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def spans_of(text: str) -> list[Span]:
    """One span per block of canonical markdown; offsets are UTF-8 byte offsets."""
    spans: list[Span] = []
    lines = text.split("\n")
    offsets = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line.encode("utf-8")) + 1

    def add(first: int, last: int, kind: str) -> None:
        start = offsets[first] + (len(lines[first].encode("utf-8")) - len(lines[first].lstrip().encode("utf-8")))
        end = offsets[last] + len(lines[last].rstrip().encode("utf-8"))
        if end > start:
            spans.append(Span(start, end, kind))

    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if _FENCE.match(line.lstrip()):
            fence = line.lstrip()[:3]
            j = i + 1
            while j < n and not lines[j].lstrip().startswith(fence):
                j += 1
            last = min(j, n - 1)
            add(i, last, "code")
            i = last + 1
            continue
        if _HEADING.match(line):
            add(i, i, "heading")
            i += 1
            continue
        if line.lstrip().startswith("|"):
            j = i
            while j + 1 < n and lines[j + 1].lstrip().startswith("|"):
                j += 1
            add(i, j, "table")
            i = j + 1
            continue
        if _LIST_ITEM.match(line):
            j = i
            # continuation lines (indented, not a new item) belong to the item
            while (j + 1 < n and lines[j + 1].strip() and not _LIST_ITEM.match(lines[j + 1])
                   and lines[j + 1].startswith((" ", "\t"))):
                j += 1
            add(i, j, "list_item")
            i = j + 1
            continue
        j = i
        while (j + 1 < n and lines[j + 1].strip() and not _HEADING.match(lines[j + 1])
               and not _FENCE.match(lines[j + 1].lstrip()) and not _LIST_ITEM.match(lines[j + 1])
               and not lines[j + 1].lstrip().startswith("|")):
            j += 1
        add(i, j, "paragraph")
        i = j + 1
    return spans


def slice_text(text: str, start: int, end: int) -> str:
    """The exact text of a span."""
    return text.encode("utf-8")[start:end].decode("utf-8")
