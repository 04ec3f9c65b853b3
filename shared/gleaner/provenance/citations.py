"""Verbatim citations: find a quote in canonical text and say which bytes and which span hold it.

A quote verifies when it occurs in the canonical text after both are brought to
the same form (NFC, whitespace runs collapsed, typographic quotes and dashes
folded); the answer is the exact byte range in the canonical text, so a reader
can slice the stored text and see the words. A quote that no longer occurs in
the current version but did in an earlier one has drifted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                       "\u00a0": " "})
_SPACE = re.compile(r"\s+")


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


def locate(canonical: str, quote: str, spans: Sequence[tuple[int, int, str]] = ()) -> Citation | None:
    """The first occurrence of quote in the canonical text, or None."""
    needle = _SPACE.sub(" ", unicodedata.normalize("NFC", quote).translate(_FOLD)).strip()
    if not needle:
        return None
    folded, index = _fold_with_map(canonical)
    at = folded.find(needle)
    if at < 0:
        return None
    first, last = index[at], index[at + len(needle) - 1] + 1
    start = len(canonical[:first].encode("utf-8"))
    end = start + len(canonical[first:last].encode("utf-8"))
    ordinal = next((n for n, (s, e, _k) in enumerate(spans) if s <= start and end <= e), None)
    return Citation(start, end, canonical[first:last], ordinal)
