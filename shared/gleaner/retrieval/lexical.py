"""Search's lexical side: BM25 over chunks and over whole pages (migration 0041's function).

As Lucene's BM25: Robertson's IDF with its ``1 +`` (no word weighs below zero), term frequency
saturated by ``k1``, length normalised by ``b``. ``knowledge.search_chunk_words`` computes both where
the chunks are, and returns only the best few chunks of the best pages:

- a chunk's score over its own words and length (which passage of a page answers);
- a page's (a text's) score over the number of its chunks holding each word and its length in chunks:
  a page that mentions the question's words across its sections is evidence a single passage does
  not show (page-level BM25 is the baseline search is judged against);
- ``coverage``: the share of the query's word weight a page holds (the relevance floor reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

K1 = 1.2
B = 0.75
PER_TERM = 200  # candidate chunks a word brings (all of a rare word's; a common word's: a bounded subset)
DF_CAP = 1000  # a word in more chunks is common: its count comes from ANALYZE, its chunks only if among the rarest
PER_TEXT = 3  # chunks returned per page: its passage is chosen among them (with the meaning side's)
TOP = 100  # pages returned: the best by page score, and those holding one of the best chunks

_WORDS = sa.text("SELECT * FROM knowledge.search_chunk_words(:q, :per_term, :df_cap, :k1, :b, :per_text, :top,"
                 " CAST(:h AS text[]))")


@dataclass
class ChunkWords:
    text_hash: str
    ordinal: int
    start: int
    end: int
    score: float  # chunk BM25


@dataclass
class PageWords:
    score: float  # page BM25
    coverage: float  # share of the query's IDF the page holds


def words(conn: Connection, query: str, hashes: list[str] | None) -> tuple[list[ChunkWords], dict[str, PageWords],
                                                                          float]:
    """Candidate chunks and pages by the query's words (over every text, or only ``hashes``), and the
    most a chunk's BM25 can reach for this query (0: no word of the query is in any chunk)."""
    rows = conn.execute(_WORDS, {"q": query, "per_term": PER_TERM, "df_cap": DF_CAP, "k1": K1, "b": B,
                                 "per_text": PER_TEXT, "top": TOP, "h": hashes}).all()
    chunks = [ChunkWords(r[0], int(r[1]), int(r[2]), int(r[3]), float(r[4])) for r in rows]
    pages = {r[0]: PageWords(float(r[5]), float(r[6])) for r in rows}
    return chunks, pages, float(rows[0][7]) if rows else 0.0
