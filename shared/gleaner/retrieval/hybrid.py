"""The candidates of one search, the pages the caller may see among them, and the answer's rows.

Candidates come from two owner-read functions that return keys and numbers, never text: migration
0041's ``search_chunk_words`` (any word of the query, with BM25's numbers:
gleaner.retrieval.lexical; words as ``knowledge.search_words`` reads them: migrations 0051, 0056) and
migration 0033/0037's ``search_chunk_candidates`` asked for its nearest vectors only (the HNSW
index's and the fresh ones', each with its cosine); both are PL/pgSQL since migration 0049, so a
session plans them once. Which documents hold each candidate's text, and whether the caller may see
them, is read under the caller's row-level security (search_index, documents, routings), and so are
the caller's searchable composites (gleaner.retrieval.composites): one statement asks both functions
and reads both lists, so a search is one round trip for its candidates. Pages are then ranked by
reciprocal rank fusion (gleaner.retrieval.fusion), and only the answer's passages are read: their
versions and bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.retrieval import lexical
from gleaner.retrieval.composites import SEARCHABLE, TEXT_BYTES
from gleaner.retrieval.fusion import Candidate
from gleaner.retrieval.lexical import PageWords

# The caller's searchable documents (row-level security decides), as columns of a hit.
_DOCUMENTS = (
    "SELECT i.text_hash, d.canonical_url AS url, d.title, d.site_domain, CAST(d.id AS text) AS document_id,"
    " CAST(i.snapshot_id AS text) AS snapshot_id, " + TEXT_BYTES +
    " FROM knowledge.search_index i"
    " JOIN knowledge.documents d ON d.id = i.document_id AND d.current_snapshot_id = i.snapshot_id"
    " WHERE d.status = 'active' AND NOT d.is_deleted"
    " AND (CAST(:site AS text) IS NULL OR d.site_domain = CAST(:site AS text))"
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.document_id = d.id"
    "   AND r.destination = 'rag' AND r.enabled)")
# Which texts the functions look at: every text, the given ones, or (a tenant small among large ones)
# those of the documents the caller's scope sees.
_EVERY_TEXT = "CAST(NULL AS text[])"
_GIVEN_TEXTS = "CAST(:h AS text[])"
_VISIBLE_TEXTS = f"ARRAY(SELECT DISTINCT v.text_hash FROM ({_DOCUMENTS}) v)"
# A byte range of a canonical text ``t`` as text ({start} and {end}: SQL expressions of the range).
TEXT_SLICE = "convert_from(substring(convert_to(t.body, 'UTF8') FROM {start} + 1 FOR {end} - {start}), 'UTF8')"
# The answer's passages: each one's version and verbatim bytes.
_PASSAGES = sa.text(
    "SELECT p.i, s.version, " + TEXT_SLICE.format(start="p.s", end="p.e") +
    " FROM unnest(CAST(:snapshots AS uuid[]), CAST(:h AS text[]), CAST(:starts AS int[]), CAST(:ends AS int[]))"
    "   WITH ORDINALITY p(snapshot_id, text_hash, s, e, i)"
    " JOIN knowledge.document_snapshots s ON s.id = p.snapshot_id"
    " JOIN knowledge.canonical_texts t ON t.text_hash = p.text_hash")


def _statement(texts: str, vectors: bool, composites: bool) -> sa.TextClause:
    """Both candidate lists over ``texts``, the visible documents holding their texts and, when asked,
    the caller's searchable composites: one row of JSON arrays."""
    ctes = [f"w AS MATERIALIZED (SELECT * FROM knowledge.search_chunk_words(:q, :per_term, :df_cap, :k1, :b,"
            f" :per_text, :top, {texts}))"]
    candidates = "SELECT w.text_hash FROM w"
    meaning = "CAST(NULL AS json)"
    if vectors:  # the meaning side alone: NULL word queries select no chunk by words
        ctes.append("m AS MATERIALIZED (SELECT m.text_hash, m.ordinal, m.chunk_start, m.chunk_end, m.embedding_score"
                    " FROM knowledge.search_chunk_candidates(CAST(NULL AS tsquery), CAST(NULL AS tsquery),"
                    f" CAST(:v AS public.vector), :m, :k, 0, {texts}, CAST(:fh AS text[]), CAST(:fo AS int[])) m)")
        candidates += " UNION SELECT m.text_hash FROM m"
        meaning = ("(SELECT json_agg(json_build_array(m.text_hash, m.ordinal, m.chunk_start, m.chunk_end,"
                   " m.embedding_score)) FROM m)")
    ctes.append(f"t AS MATERIALIZED ({candidates})")
    ctes.append(f"d AS ({_DOCUMENTS} AND i.text_hash IN (SELECT t.text_hash FROM t))")
    return sa.text(
        "WITH " + ", ".join(ctes) +
        " SELECT (SELECT json_agg(json_build_array(w.text_hash, w.ordinal, w.chunk_start, w.chunk_end,"
        "   w.chunk_score, w.page_score, w.coverage, w.query_weight)) FROM w),"
        f" {meaning}, (SELECT json_agg(d) FROM d),"
        + (f" (SELECT json_agg(c) FROM ({SEARCHABLE}) c)" if composites else " CAST(NULL AS json)"))


@dataclass
class Pool:
    """One search's candidate chunks with both scores, and the page-level words of their texts."""
    chunks: dict[tuple[str, int], Candidate]
    pages: dict[str, PageWords]
    query_weight: float  # the most a passage's BM25 can reach for this query (fulltext_score's scale)

    def texts(self) -> list[str]:
        return sorted({c.text_hash for c in self.chunks.values()})


@dataclass
class Gathered:
    """A pool, the caller's documents holding its texts, and (first pass) the caller's composites."""
    pool: Pool
    documents: list[dict[str, Any]]
    composites: list[dict[str, Any]]


def _rows(value: Any) -> list[Any]:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str | bytes) else list(value)


def gather(conn: Connection, query: str, vector: str | None, model: str, k: int, site: str | None, *,
           texts: list[str] | None = None, visible_only: bool = False, composites: bool = False,
           fresh: tuple[list[str], list[int]] | tuple[None, None] = (None, None)) -> Gathered:
    """Both candidate lists (over every text, only ``texts``, or the caller's visible texts), merged by
    chunk, with the caller's documents holding them. ``fresh`` holds the keys of the fresh vectors the
    sign-bit scan chose (None: the function compares every fresh vector)."""
    scope = _VISIBLE_TEXTS if visible_only else _GIVEN_TEXTS if texts is not None else _EVERY_TEXT
    params = {"q": query, "per_term": lexical.PER_TERM, "df_cap": lexical.DF_CAP, "k1": lexical.K1, "b": lexical.B,
              "per_text": lexical.PER_TEXT, "top": lexical.TOP, "h": texts, "v": vector, "m": model, "k": k,
              "fh": fresh[0], "fo": fresh[1], "site": site}
    words, meaning, documents, visible = conn.execute(_statement(scope, vector is not None, composites),
                                                      params).one()
    chunks: dict[tuple[str, int], Candidate] = {}
    pages: dict[str, PageWords] = {}
    weight = 0.0
    for h, o, s, e, score, page, coverage, most in _rows(words):
        chunks[(h, int(o))] = Candidate(h, int(o), int(s), int(e), words=float(score))
        pages[h] = PageWords(float(page), float(coverage))
        weight = float(most)
    for h, o, s, e, cosine in _rows(meaning):
        key = (h, int(o))
        cand = chunks.get(key) or chunks.setdefault(key, Candidate(h, key[1], int(s), int(e)))
        cand.meaning = max(0.0, float(cosine))
    return Gathered(Pool(chunks, pages, weight), _rows(documents), _rows(visible))


def passages(conn: Connection, picks: list[tuple[str, str, int, int]]) -> list[tuple[int, str]]:
    """(version, text) of each (snapshot id, text hash, start, end), in order."""
    if not picks:
        return []
    rows = conn.execute(_PASSAGES, {"snapshots": [p[0] for p in picks], "h": [p[1] for p in picks],
                                    "starts": [p[2] for p in picks], "ends": [p[3] for p in picks]}).all()
    by_index = {int(r[0]): (int(r[1]), str(r[2])) for r in rows}
    return [by_index[i + 1] for i in range(len(picks))]
