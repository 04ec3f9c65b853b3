"""Aggregate pages: a page whose text is largely the union of other pages of its site.

Documentation generators publish a whole book or API again on one page (mdBook's ``print.html``,
Node.js's ``all.html``, a "single page" edition). Kept like any page, such a page answers every
search with one huge hit and hides the chapter that says the same thing. This module finds them,
pure: paragraphs of each text (blocks between blank lines, whitespace folded, short ones left out),
and a page is an aggregate when most of its paragraphs are other pages' paragraphs, drawn from
several of them: most are still covered without its largest source, so a page and its twin (the
same API page under two paths) are no aggregates of each other. Shared text (a paragraph on more
than a few pages: a notice, a trait's method documentation repeated on every type implementing it,
as rustdoc does) counts for nothing either way: an edition of the whole quotes each chapter, which is
on one page. The largest texts are judged first and an aggregate found is no source for the next, so
a site with two editions of everything (a print page and a single-page one) does not make its
chapters aggregates.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

# A paragraph shorter than this is a heading, a link or a label: shared by chance, no evidence.
MIN_PARAGRAPH_CHARS = 40
# A text with fewer paragraphs is an ordinary page, whatever it repeats.
MIN_PARAGRAPHS = 20
# Share of a page's paragraphs found on other pages, and how many pages they come from, for an aggregate.
COVERED_SHARE = 0.6
MIN_SOURCES = 3
# A paragraph on more pages than this share of the site (or MIN_SOURCES), or than MAX_HOLDERS, is shared
# text. An aggregate's paragraph is on its chapter, itself and perhaps another edition: a paragraph on
# more pages is no chapter's (rustdoc repeats a trait's method docs on every implementing type: with the
# share alone, most of the standard library's struct pages were found aggregates).
BOILERPLATE_SHARE = 0.2
MAX_HOLDERS = 4

KEY_BYTES = 12  # a paragraph's key: a BLAKE2b digest this long
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
            keys.add(hashlib.blake2b(folded.encode("utf-8"), digest_size=KEY_BYTES).digest())
    return keys


def find_aggregates(texts: Mapping[str, set[bytes]], candidates: Collection[str] | None = None) -> dict[str, Aggregate]:
    """Which of ``texts`` (document id -> its paragraph keys) are aggregates; only ``candidates`` are judged
    (all by default), every text is a source until it is found an aggregate."""
    holders: dict[bytes, set[str]] = defaultdict(set)
    for doc, keys in texts.items():
        for key in keys:
            holders[key].add(doc)
    shared = max(MIN_SOURCES, min(int(len(texts) * BOILERPLATE_SHARE), MAX_HOLDERS))
    out: dict[str, Aggregate] = {}  # found so far: no source for the next
    for doc in sorted(texts, key=lambda d: (-len(texts[d]), d)):
        keys = texts[doc]
        if len(keys) < MIN_PARAGRAPHS or (candidates is not None and doc not in candidates):
            continue
        judged = 0
        held: list[set[str]] = []  # the other pages holding each covered paragraph
        for key in keys:
            if len(holders[key]) > shared:
                continue
            judged += 1
            others = holders[key] - out.keys() - {doc}
            if others:
                held.append(others)
        sources = Counter(page for others in held for page in others)
        largest = min(sources, key=lambda page: (-sources[page], page)) if sources else None
        covered = sum(1 for others in held if others - {largest})
        if judged >= MIN_PARAGRAPHS and covered >= COVERED_SHARE * judged and len(sources) >= MIN_SOURCES:
            out[doc] = Aggregate(covered / judged, len(sources))
    return out
