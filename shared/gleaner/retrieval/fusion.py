"""Reciprocal rank fusion of the lexical and dense rankings, by page, and each page's best passage.

Scores of BM25 and of cosine similarity live on different scales, which differ again by query and by
model; ranks do not. A page's fused score is the sum of ``weight / (RRF_K + rank)`` over three
rankings of the candidate pages (Cormack, Clarke and Büttcher's reciprocal rank fusion):

- by the page's BM25 (the page's words as a whole: gleaner.retrieval.lexical);
- by its best chunk's BM25 (one passage that holds the question's words);
- by its best chunk's cosine similarity to the query, less a length allowance (meaning; absent
  without vectors).

A long page's best chunk is the best of many draws: a changelog or a whole manual on one page holds
some chunk close to almost any question, and ranked by its best chunk alone it stood in the top three
of most questions on real documentation (Sphinx's 890 kB changelog in 30 of 68). Its cosine is
lowered by ``MEANING_LENGTH * ln(1 + bytes / LENGTH_UNIT)``, as BM25 normalises a page's length;
set on the tuning sets, checked on the held-out one (infra/bench/realdocs.py, docs/retrieval.md).

A page missing from a ranking gets nothing from it. With the meaning side there, a page enters the
two word rankings only if it holds ``MIN_COVERAGE`` of the query's word weight (IDF): ranks ignore
how weak a match is, so a page sharing one stray word with the question ("turn", "machine") would
otherwise rank first twice over and push the page that answers it by meaning out of the top three.
Without vectors the words are all there is, and every matching page is ranked. A page left in no
ranking still answers, last (by its page BM25), so a search still fills its ``limit``.

The passage answered for a page is its chunk with the best fusion of the two chunk rankings. ``score``
is the fused score over the most a page can get (first in every ranking), so 0-1, comparable across
queries only loosely: it is a rank score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Not the usual 60: at 60, a page mid-table in all three lists (4th, 4th, 6th) outscores one first in two
# and absent from the third, the page BM25 finds by its rare words; at 5 the first places count. Two of
# the three lists are by words, so meaning weighs 1.3 and the passage's words 0.7: the words' two lists
# together still outweigh it, and a page first by meaning is no longer outvoted by one that is merely
# near the top of both word lists. Chosen on the tuning sets (Node.js, Sphinx) once the word side no
# longer depended on storage order (migration 0051), from a plateau (meaning 1.15-1.5, passage words
# 0.6-0.85, k 5-7 all within a question of each other), checked once on valgrind (infra/bench/realdocs.py).
RRF_K = 5
WEIGHTS = {"page_words": 1.0, "chunk_words": 0.7, "meaning": 1.3}
MIN_COVERAGE = 0.15  # as the relevance floor's share (gleaner.retrieval.ranking.FLOOR_COVERAGE)
STRAY_WEIGHT = 0.01  # a page in no ranking still answers, after all others, with a score near 0
MEANING_LENGTH = 0.08  # cosine taken off per natural log of a page's length in LENGTH_UNITs (+1)
LENGTH_UNIT = 2000  # bytes: about a chunk


@dataclass
class Candidate:
    """One chunk: where it is, and its two scores (None: not in that list)."""
    text_hash: str
    ordinal: int
    start: int
    end: int
    words: float | None = None  # chunk BM25
    meaning: float | None = None  # cosine similarity, below 0 as 0


@dataclass
class RankedPage:
    key: str  # a page: the document (or composite) answered
    text_hash: str
    best: Candidate
    score: float


def _ranks(scored: Iterable[tuple[str, float]], tie: dict[str, str] | None = None) -> dict[str, int]:
    """1-based ranks by score, best first; a tie is broken by ``tie[key]`` (a page's text hash: the same
    for the same content in every crawl, where a document's id is not), then by the key."""
    tie = tie or {}
    order = sorted(scored, key=lambda kv: (-kv[1], tie.get(kv[0], ""), kv[0]))
    return {key: i + 1 for i, (key, _s) in enumerate(order)}


def fuse(pages: dict[str, str], chunks: Sequence[Candidate], page_words: dict[str, float],
         dense: bool, coverage: dict[str, float] | None = None,
         lengths: dict[str, int] | None = None) -> list[RankedPage]:
    """Rank pages {page key: its text hash} from their texts' candidate chunks and page BM25 (and the
    share of the query's word weight each text holds, and each text's length in bytes), best first."""
    by_text: dict[str, list[Candidate]] = {}
    for c in chunks:
        by_text.setdefault(c.text_hash, []).append(c)
    chunk_key = {id(c): f"{c.text_hash}:{c.ordinal}" for c in chunks}
    chunk_word_rank = _ranks((chunk_key[id(c)], c.words) for c in chunks if c.words)
    chunk_meaning_rank = _ranks((chunk_key[id(c)], c.meaning) for c in chunks if c.meaning is not None)

    def passage_score(c: Candidate) -> float:
        k = chunk_key[id(c)]
        return sum(1 / (RRF_K + r[k]) for r in (chunk_word_rank, chunk_meaning_rank) if k in r)

    live = {key: text for key, text in pages.items() if text in by_text}
    worded = {key: text for key, text in live.items()
              if not dense or coverage is None or coverage.get(text, 0.0) >= MIN_COVERAGE}
    allowance = {text: MEANING_LENGTH * math.log1p((lengths or {}).get(text, 0) / LENGTH_UNIT) for text in by_text}
    lists = {
        "page_words": _ranks(((key, page_words[text]) for key, text in worded.items() if page_words.get(text)),
                             live),
        "chunk_words": _ranks(((key, max(c.words or 0 for c in by_text[text])) for key, text in worded.items()
                               if any(c.words for c in by_text[text])), live),
    }
    if dense:
        lists["meaning"] = _ranks(((key, max(c.meaning for c in by_text[text] if c.meaning is not None)
                                    - allowance[text])
                                   for key, text in live.items()
                                   if any(c.meaning is not None for c in by_text[text])), live)
    best_possible = sum(WEIGHTS[name] / (RRF_K + 1) for name in lists) or 1.0
    # Pages in no ranking (a stray word, nothing close in meaning) come last, by their page BM25.
    stray = _ranks(((key, page_words.get(text, 0.0)) for key, text in live.items()
                    if not any(key in ranks for ranks in lists.values())), live)
    ranked = []
    for key, text in live.items():
        fused = sum(WEIGHTS[name] / (RRF_K + ranks[key]) for name, ranks in lists.items() if key in ranks)
        if key in stray:
            fused = STRAY_WEIGHT / (RRF_K + stray[key])
        best = max(by_text[text], key=lambda c: (passage_score(c), -c.start))
        ranked.append(RankedPage(key, text, best, fused / best_possible))
    ranked.sort(key=lambda p: (p.key in stray, -p.score, p.text_hash, p.key))
    return ranked
