"""The candidates of one search, the pages the caller may see among them, and the answer's rows.

Candidates come from two owner-read functions that return keys and numbers, never text:
migration 0041's ``search_chunk_words`` (any word of the query, with BM25's numbers:
gleaner.retrieval.lexical) and migration 0033/0037's ``search_chunk_candidates`` asked for its
nearest vectors only (the HNSW index's and the fresh ones', each with its cosine). Which documents
hold each candidate's text, and whether the caller may see them, is read under the caller's
row-level security (search_index, documents, routings); a composite's pages likewise
(gleaner.retrieval.composites). Pages are then ranked by reciprocal rank fusion
(gleaner.retrieval.fusion), and only the answer's passages are read: their versions and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.retrieval.fusion import Candidate
from gleaner.retrieval.lexical import PageWords, words

# The meaning side alone: NULL word queries select no chunk by words.
_MEANING = sa.text(
    "SELECT text_hash, ordinal, chunk_start, chunk_end, embedding_score FROM knowledge.search_chunk_candidates("
    "CAST(NULL AS tsquery), CAST(NULL AS tsquery), CAST(:v AS public.vector), :m, :k, 0, CAST(:h AS text[]),"
    " CAST(:fh AS text[]), CAST(:fo AS int[]))")
_DOCUMENTS = sa.text(
    "SELECT i.text_hash, d.canonical_url AS url, d.title, d.site_domain, CAST(d.id AS text) AS document_id,"
    " CAST(i.snapshot_id AS text) AS snapshot_id"
    " FROM knowledge.search_index i"
    " JOIN knowledge.documents d ON d.id = i.document_id AND d.current_snapshot_id = i.snapshot_id"
    " WHERE i.text_hash = ANY(CAST(:h AS text[])) AND d.status = 'active' AND NOT d.is_deleted"
    " AND (CAST(:site AS text) IS NULL OR d.site_domain = CAST(:site AS text))"
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.document_id = d.id"
    "   AND r.destination = 'rag' AND r.enabled)")
# A tenant small among large ones: the texts its scope sees, for the second pass.
_VISIBLE_TEXTS = sa.text(
    "SELECT DISTINCT i.text_hash FROM knowledge.search_index i"
    " JOIN knowledge.documents d ON d.id = i.document_id AND d.current_snapshot_id = i.snapshot_id"
    " WHERE d.status = 'active' AND NOT d.is_deleted"
    " AND (CAST(:site AS text) IS NULL OR d.site_domain = CAST(:site AS text))"
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.document_id = d.id"
    "   AND r.destination = 'rag' AND r.enabled)")
# The answer's passages: each one's version and verbatim bytes.
_PASSAGES = sa.text(
    "SELECT p.i, s.version, convert_from(substring(convert_to(t.body, 'UTF8') FROM p.s + 1 FOR p.e - p.s), 'UTF8')"
    " FROM unnest(CAST(:snapshots AS uuid[]), CAST(:h AS text[]), CAST(:starts AS int[]), CAST(:ends AS int[]))"
    "   WITH ORDINALITY p(snapshot_id, text_hash, s, e, i)"
    " JOIN knowledge.document_snapshots s ON s.id = p.snapshot_id"
    " JOIN knowledge.canonical_texts t ON t.text_hash = p.text_hash")


@dataclass
class Pool:
    """One search's candidate chunks with both scores, and the page-level words of their texts."""
    chunks: dict[tuple[str, int], Candidate]
    pages: dict[str, PageWords]
    query_weight: float  # the most a passage's BM25 can reach for this query (fulltext_score's scale)

    def texts(self) -> list[str]:
        return sorted({c.text_hash for c in self.chunks.values()})


def gather(conn: Connection, query: str, vector: str | None, model: str, k: int,
           hashes: list[str] | None, fresh: tuple[list[str], list[int]] | tuple[None, None] = (None, None)) -> Pool:
    """Both candidate lists (over every text, or only ``hashes``), merged by chunk. ``fresh`` holds the keys
    of the fresh vectors the sign-bit scan chose (None: the function compares every fresh vector)."""
    scored, pages, weight = words(conn, query, hashes)
    chunks: dict[tuple[str, int], Candidate] = {}
    for c in scored:
        chunks[(c.text_hash, c.ordinal)] = Candidate(c.text_hash, c.ordinal, c.start, c.end, words=c.score)
    if vector is not None:
        for r in conn.execute(_MEANING, {"v": vector, "m": model, "k": k, "h": hashes,
                                               "fh": fresh[0], "fo": fresh[1]}).mappings():
            key = (r["text_hash"], int(r["ordinal"]))
            cand = chunks.get(key) or chunks.setdefault(key, Candidate(key[0], key[1], int(r["chunk_start"]),
                                                                       int(r["chunk_end"])))
            cand.meaning = max(0.0, float(r["embedding_score"]))
    return Pool(chunks, pages, weight)


def visible_documents(conn: Connection, texts: list[str], site: str | None) -> list[dict[str, Any]]:
    """The caller's searchable documents holding these texts (row-level security decides)."""
    if not texts:
        return []
    return [dict(r) for r in conn.execute(_DOCUMENTS, {"h": texts, "site": site}).mappings()]


def visible_texts(conn: Connection, site: str | None) -> list[str]:
    return list(conn.execute(_VISIBLE_TEXTS, {"site": site}).scalars())


def passages(conn: Connection, picks: list[tuple[str, str, int, int]]) -> list[tuple[int, str]]:
    """(version, text) of each (snapshot id, text hash, start, end), in order."""
    if not picks:
        return []
    rows = conn.execute(_PASSAGES, {"snapshots": [p[0] for p in picks], "h": [p[1] for p in picks],
                                    "starts": [p[2] for p in picks], "ends": [p[3] for p in picks]}).all()
    by_index = {int(r[0]): (int(r[1]), str(r[2])) for r in rows}
    return [by_index[i + 1] for i in range(len(picks))]
