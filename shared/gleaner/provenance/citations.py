"""Verbatim citations: find a quote in canonical text and say which bytes and which span hold it.

A quote is found when it occurs in the canonical text after both are brought to
the same form (invisible characters dropped, NFC, whitespace runs collapsed,
typographic quotes and dashes folded) and the occurrence begins and ends on word
boundaries of the text ("ost" is not found in "costs"). The answer is the exact
byte range in the canonical text, so a reader can slice the stored text and see
the words: the cited quote is those bytes, and checking a citation later is a
byte comparison (:func:`check_slice`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gleaner.provenance.canonical import bytes_hash, is_invisible
from gleaner.provenance.quotes import QuoteRefusal, is_boundary, normalise_quote, quote_refusal

_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                       "\u00a0": " "})


@dataclass(frozen=True, slots=True)
class Citation:
    start: int  # byte offsets into the canonical text, half-open
    end: int
    text: str  # the canonical text's own bytes in that range
    span_ordinal: int | None  # the span (block) that contains the quote, if one does


def _fold_with_map(text: str) -> tuple[str, list[int]]:
    """Folded text plus, for each folded character, the index of its source character."""
    out: list[str] = []
    index: list[int] = []
    previous_space = False
    for i, char in enumerate(text):
        if is_invisible(char) and char not in "\n\t":
            continue
        char = char.translate(_FOLD)
        if char.isspace():
            if previous_space:
                continue
            char, previous_space = " ", True
        else:
            previous_space = False
        out.append(char)
        index.append(i)
    return "".join(out), index


def find(canonical: str, quote: str, spans: Sequence[tuple[int, int, str]] = ()) -> Citation | QuoteRefusal:
    """The first occurrence of the quote on word boundaries, or why it cannot be cited from this text."""
    refusal = quote_refusal(quote)
    if refusal is not None:
        return refusal
    needle = normalise_quote(quote).translate(_FOLD)
    folded, index = _fold_with_map(canonical)
    at = folded.find(needle)
    found_inside_words = False
    while at >= 0:
        first, last = index[at], index[at + len(needle) - 1] + 1
        if is_boundary(canonical, first) and is_boundary(canonical, last):
            start = len(canonical[:first].encode("utf-8"))
            end = start + len(canonical[first:last].encode("utf-8"))
            ordinal = next((n for n, (s, e, _k) in enumerate(spans) if s <= start and end <= e), None)
            return Citation(start, end, canonical[first:last], ordinal)
        found_inside_words = True
        at = folded.find(needle, at + 1)
    return QuoteRefusal.NOT_ON_WORD_BOUNDARIES if found_inside_words else QuoteRefusal.NOT_IN_TEXT


def locate(canonical: str, quote: str, spans: Sequence[tuple[int, int, str]] = ()) -> Citation | None:
    """The first citable occurrence of quote in the canonical text, or None."""
    found = find(canonical, quote, spans)
    return found if isinstance(found, Citation) else None


@dataclass(frozen=True, slots=True)
class VersionCitation:
    """A quote found in one stored version of a document."""

    version: int
    snapshot_id: str
    text_hash: str
    current: bool  # the document's current version (else the quote has drifted away)
    citation: Citation
    span_kind: str | None  # the kind of the span holding it; None when it crosses blocks


# (version, snapshot id, text hash, is current) of each stored version; text hash -> (text, spans).
StoredVersion = tuple[int, str, str, bool]
TextLoader = Callable[[str], tuple[str, list[tuple[int, int, str]]] | None]


def locate_in_versions(versions: Iterable[StoredVersion], quote: str,
                       text_of: TextLoader) -> VersionCitation | None:
    """The quote in a document's stored versions: the current one first, then the newest.

    The current version first, not the highest: after a revert the current one is an older number."""
    for version, snapshot_id, text_hash, current in sorted(versions, key=lambda v: (not v[3], -v[0])):
        stored = text_of(text_hash)
        if stored is None:
            continue
        text, spans = stored
        cite = locate(text, quote, spans)
        if cite is not None:
            kind = spans[cite.span_ordinal][2] if cite.span_ordinal is not None else None
            return VersionCitation(version, snapshot_id, text_hash, current, cite, kind)
    return None


@dataclass(frozen=True, slots=True)
class SliceCheck:
    """Whether stored bytes still carry a citation: its text hash and the quote at its offsets."""

    intact: bool  # BLAKE3 of the bytes is the text hash the citation names
    holds: bool  # bytes[start:end] is the quote, on word boundaries


def check_slice(body: bytes, text_hash: str, start: int, end: int, quote: str) -> SliceCheck:
    """Check a citation against the stored canonical text's bytes alone (what a third party repeats)."""
    if bytes_hash(body) != text_hash:
        return SliceCheck(False, False)
    if not 0 <= start < end <= len(body) or body[start:end] != quote.encode("utf-8"):
        return SliceCheck(True, False)
    try:
        before = body[:start].decode("utf-8")
        text = before + quote + body[end:].decode("utf-8")
    except UnicodeDecodeError:
        return SliceCheck(True, False)
    first = len(before)
    return SliceCheck(True, is_boundary(text, first) and is_boundary(text, first + len(quote))
                      and unicodedata.is_normalized("NFC", quote))
