"""Search's lexical side: BM25 over chunks and over whole pages (migration 0041's function, PL/pgSQL
since 0049; gleaner.retrieval.hybrid calls it with these constants).

As Lucene's BM25: Robertson's IDF with its ``1 +`` (no word weighs below zero), term frequency
saturated by ``k1``, length normalised by ``b``. ``knowledge.search_chunk_words`` computes both where
the chunks are, and returns only the best few chunks of the best pages:

- a chunk's score over its own words and length (which passage of a page answers);
- a page's (a text's) score over the number of its chunks holding each word and its length in chunks:
  a page that mentions the question's words across its sections is evidence a single passage does
  not show (page-level BM25 is the baseline search is judged against);
- ``coverage``: the share of the query's word weight a page holds (the relevance floor reads it).

A word is what ``knowledge.search_words`` reads (migrations 0051, 0056), for chunks and query alike:
PostgreSQL's English configuration (its stemmer and stop words) over the text with ``. / : - @ ~``
read as spaces, so the words inside ``fs.readFile``, ``/usr/lib/valgrind`` and a link are words of
the page, as BM25 baselines read them, not one host, file or URL token each; and an acronym's plural
is its singular ("CPUs" is ``cpu``, which the English stemmer alone leaves ``cpus``).
"""

from __future__ import annotations

from dataclasses import dataclass

K1 = 1.2
B = 0.75
# A word in fewer than DF_CAP chunks brings every one of them (migration 0051: a page's BM25 sums its
# candidate chunks, so an arbitrary subset made two crawls of the same pages rank differently); a word in
# more is common: its count comes from ANALYZE, and PER_TERM of its chunks only when it is the rarest.
PER_TERM = 200
DF_CAP = 1000
PER_TEXT = 3  # chunks returned per page: its passage is chosen among them (with the meaning side's)
TOP = 100  # pages returned: the best by page score, and those holding one of the best chunks


@dataclass
class PageWords:
    score: float  # page BM25
    coverage: float  # share of the query's IDF the page holds

