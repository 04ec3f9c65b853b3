"""Aggregate pages: a page whose text is largely the union of other pages of its site.

Documentation generators publish a whole book or API again on one page (mdBook's ``print.html``,
Node.js's ``all.html``, a "single page" edition). Kept like any page, such a page answers every
search with one huge hit and hides the chapter that says the same thing. This module finds them,
pure: paragraphs of each text (blocks between blank lines, whitespace folded, short ones left out),
and a page is an aggregate when most of its paragraphs are other pages' paragraphs, drawn from
several of them. Boilerplate (a paragraph on many pages) counts for nothing either way. The largest
texts are judged first and an aggregate found is no source for the next, so a site with two
editions of everything (a print page and a single-page one) does not make its chapters aggregates.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

# A paragraph shorter than this is a heading, a link or a label: shared by chance, no evidence.
MIN_PARAGRAPH_CHARS = 40
# A text with fewer paragraphs is an ordinary page, whatever it repeats.
MIN_PARAGRAPHS = 20
# Share of a page's paragraphs found on other pages, and how many pages they come from, for an aggregate.
COVERED_SHARE = 0.6
MIN_SOURCES = 3
# A paragraph on more pages than this share of the site (or MIN_SOURCES) is boilerplate.
BOILERPLATE_SHARE = 0.2

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Aggregate:
    """Why a page is an aggregate: the share of its paragraphs other pages hold, and how many pages."""

    covered: float
    sources: int

    def describe(self) -> str:
        return f"{round(self.covered * 100)} % of its paragraphs are on {self.sources} other pages of the site"


def paragraphs(text: str) -> set[bytes]:
    """The paragraph keys of a text: a digest of each block between blank lines, whitespace folded."""
    keys: set[bytes] = set()
    for block in re.split(r"\n\s*\n", text):
        folded = _SPACE.sub(" ", block).strip().lstrip("#>*- ").lower()
        if len(folded) >= MIN_PARAGRAPH_CHARS:
            keys.add(hashlib.blake2b(folded.encode("utf-8"), digest_size=12).digest())
    return keys


def find_aggregates(texts: Mapping[str, set[bytes]], known: frozenset[str] = frozenset()) -> dict[str, Aggregate]:
    """Which of ``texts`` (document id -> its paragraph keys) are aggregates; ``known`` are aggregates already
    (no source for others, not judged again)."""
    holders: dict[bytes, set[str]] = defaultdict(set)
    for doc, keys in texts.items():
        for key in keys:
            holders[key].add(doc)
    boilerplate = max(MIN_SOURCES, int(len(texts) * BOILERPLATE_SHARE))
    out: dict[str, Aggregate] = {}
    gone = set(known)
    for doc in sorted(texts, key=lambda d: (-len(texts[d]), d)):
        keys = texts[doc]
        if doc in gone or len(keys) < MIN_PARAGRAPHS:
            continue
        judged = covered = 0
        sources: set[str] = set()
        for key in keys:
            others = holders[key] - gone - {doc}
            if len(holders[key]) > boilerplate:
                continue
            judged += 1
            if others:
                covered += 1
                sources.update(others)
        if judged >= MIN_PARAGRAPHS and covered >= COVERED_SHARE * judged and len(sources) >= MIN_SOURCES:
            out[doc] = Aggregate(covered / judged, len(sources))
            gone.add(doc)
    return out
