"""Canonical text and its span ledger (seed 004): pure functions of strings.

Canonical text is addressed by its BLAKE3 hash. A span is a half-open byte range
[start, end) into the UTF-8 bytes of the canonical text, one per markdown block
(heading, paragraph, list item, table, code block), with its kind. Bytes are
forever; tokens and lines are not.

The canonicaliser is versioned and each stored text records the version that
made it, so a third party can recompute a text from its body (content.md) with
the same rules. A text made by an earlier version stays valid for that version:
its hash, spans and citations are about its own bytes, never re-derived.

- version 1: LF line endings, NFC, trailing whitespace of the text dropped.
- version 2 (seed 002): invisible characters removed first (format characters,
  Unicode Cf: zero-width space/joiners, word joiner, BOM, soft hyphen, bidi
  controls and isolates, tag characters; variation selectors, Hangul fillers and
  the combining grapheme joiner; control characters other than LF and tab), then
  NFC, then whitespace: each run of spaces inside a line becomes one space,
  lines lose their trailing whitespace, and more than one blank line becomes
  one. Indentation is kept (it is markdown structure). Removal comes before
  composition, so canonicalising twice changes nothing.
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

CANONICALISER_VERSION = 2

# What version 2 removes, fixed here rather than read from the running Python's Unicode tables, so
# the same body canonicalises to the same bytes on every interpreter: the format characters (Cf) of
# Unicode 14, the control characters (Cc) other than tab and LF, and the default-ignorable code points
# that render as nothing (combining grapheme joiner, Mongolian variation selectors, Hangul fillers,
# variation selectors).
_INVISIBLE_RANGES = (
    (0x0000, 0x0008), (0x000B, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x034F, 0x034F),
    (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891),
    (0x08E2, 0x08E2), (0x115F, 0x1160), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xE0100, 0xE01EF),
)
_INVISIBLE = re.compile("[" + "".join(
    re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _INVISIBLE_RANGES
) + "]+")
_ASCII_CONTROLS = bytes(b for b in range(128) if _INVISIBLE.match(chr(b)))


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    kind: str  # heading | paragraph | list_item | table | code


@dataclass(frozen=True, slots=True)
class CanonicalText:
    """What ingest stores for one body: its canonical text, its BLAKE3 hash, the span ledger, its SimHash."""

    text_hash: str  # BLAKE3 of the canonical text's UTF-8 bytes
    text: bytes  # the canonical text, UTF-8 (the body itself when canonicalising changed nothing)
    spans_json: str  # the spans as a JSON array of [start, end, kind]: the form the database takes
    simhash: int = 0  # 64-bit SimHash over word shingles (near-duplicates), unsigned
    version: int = CANONICALISER_VERSION  # the canonicaliser that made it

    def spans(self) -> list[Span]:
        return [Span(start, end, kind) for start, end, kind in json.loads(self.spans_json)]


def canonicalise(source: bytes, decoded: str | None = None) -> CanonicalText:
    """Canonical text (the current canonicaliser), hash, spans and SimHash of a body.

    ``decoded``, when the caller has it, is ``source`` as text (``source == decoded.encode()``):
    a body already canonical is then not encoded again, and pickles once with the body.
    """
    from gleaner.provenance.simhash import simhash

    text = canonical_text(source.decode("utf-8", errors="replace") if decoded is None else decoded)
    encoded = source if decoded is not None and text == decoded else text.encode("utf-8")
    return CanonicalText(
        text_hash=bytes_hash(encoded),
        text=encoded,
        spans_json=json.dumps([[s.start, s.end, s.kind] for s in spans_of(text)], separators=(",", ":")),
        simhash=simhash(text),
    )


def canonical_text(markdown: str, version: int = CANONICALISER_VERSION) -> str:
    """The canonical form of a body under the given canonicaliser version (module docstring)."""
    if version == 1:
        return _canonical_text_v1(markdown)
    if version != 2:
        raise ValueError(f"unknown canonicaliser version {version}")
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", remove_invisible(text))
    # Line by line with str.split (C) rather than regular expressions over the whole text: one pass
    # instead of three. Each line keeps its indentation; its other whitespace runs become one space.
    lines: list[str] = []
    blank = True  # no blank line at the start
    for line in text.split("\n"):
        words = line.split()
        if not words:
            if not blank:
                lines.append("")
            blank = True
            continue
        indent = len(line) - len(line.lstrip())
        lines.append(line[:indent] + " ".join(words) if indent else " ".join(words))
        blank = False
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _canonical_text_v1(markdown: str) -> str:
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    return text.rstrip() + "\n" if text.strip() else ""


def is_invisible(char: str) -> bool:
    """A character that renders as nothing: it could hide words from a reader but not from a matcher."""
    return _INVISIBLE.match(char) is not None


def _has_ascii_control(data: bytes) -> bool:
    return len(data.translate(None, _ASCII_CONTROLS)) != len(data)


def remove_invisible(text: str) -> str:
    """The text without invisible characters (see ``_INVISIBLE_RANGES``); LF and tab stay."""
    if text.isascii() and not _has_ascii_control(text.encode("ascii")):
        return text  # most pages: only an ASCII control could be invisible, and there is none
    return _INVISIBLE.sub("", text)


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
