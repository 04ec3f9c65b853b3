"""Hybrid search over site documents: ranked citable chunks with their embedding and full-text scores.

Two candidate lists, merged and re-scored:

- by meaning: the HNSW index's nearest chunks to the query's vector (cosine), when pgvector is there,
  and the nearest of the fresh vectors not in that index yet, each compared (gleaner.retrieval.fresh);
- by words: chunks whose full-text vector matches any of the query's stemmed words.

Every candidate gets both scores, each 0-1: ``embedding_score`` is the cosine similarity (below 0
counts as 0), ``fulltext_score`` is ``ts_rank_cd`` with PostgreSQL's ``rank / (rank + 1)``
normalisation; ``score = 0.6 * embedding + 0.4 * full text`` (the feed spec's blend). Without
pgvector ``embedding_score`` is null and ``score`` is the full-text score.

Only documents in ``search_index`` whose indexed snapshot is still their current one, that are
active, not deleted and have an enabled ``rag`` routing are answered: row-level security on
``documents`` and ``search_index`` limits that to the caller's tenant scope. The candidates come
from two functions of migration 0031 that read ``text_chunks`` as its owner (under the row policy
the GIN index is unusable) and return keys only; the statement keeps the visible ones. The indexes
hold every tenant's chunks, so their nearest may all belong to others; when too few are visible,
the functions are asked again for the caller's visible texts only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gleaner.errors import InvalidInput

if TYPE_CHECKING:
    from gleaner.app import Deps

EMBEDDING_WEIGHT = 0.6
FULLTEXT_WEIGHT = 0.4
MAX_LIMIT = 100
MAX_QUERY_CHARS = 1000
CANDIDATES = 50  # per list: enough to re-rank well, few enough to score every one exactly
WORD_CAP = 200  # full-text matches ranked per query: beyond it an arbitrary subset (the index's order)
PREVIEW_CHARS = 280

_VISIBLE = (
    " JOIN knowledge.search_index i ON i.text_hash = c.text_hash"
    " JOIN knowledge.documents d ON d.id = i.document_id AND d.current_snapshot_id = i.snapshot_id"
    " WHERE d.status = 'active' AND NOT d.is_deleted"
    " AND (CAST(:site AS text) IS NULL OR d.site_domain = CAST(:site AS text))"
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.document_id = d.id"
    "   AND r.destination = 'rag' AND r.enabled)"
)
# Scoring: any stemmed word of the query counts (a paraphrase shares few of a page's words).
_QUERY = "replace(CAST(plainto_tsquery('english', :q) AS text), '&', '|')"
_TSQUERY = f"CAST(NULLIF({_QUERY}, '') AS tsquery)"
# Candidates by words, beside the embedding's: chunks with every word of the query. With vectors the
# meaning side finds the paraphrases; without them (full text only) any word selects when too few
# chunks have every word.
_ALL_WORDS = "plainto_tsquery('english', :q)"


# The caller's visible texts, for the second pass (a small tenant among large ones): this subquery runs
# under the caller's row-level security, and the candidate functions then look only at those texts.
_VISIBLE_TEXTS = ("ARRAY(SELECT DISTINCT i.text_hash FROM knowledge.search_index i"
                  " JOIN knowledge.documents d ON d.id = i.document_id AND d.current_snapshot_id = i.snapshot_id"
                  + _VISIBLE[_VISIBLE.index(" WHERE "):] + ")")


_NO_TEXTS = "CAST(NULL AS text[])"


def _statement(vectors: bool, visible_only: bool) -> sa.TextClause:
    """One statement: the candidates with their scores, the visible ones kept, the ``:limit`` best sliced.

    With vectors, knowledge.search_chunk_candidates (migration 0033) gives both candidate lists with
    their byte ranges and scores, read as text_chunks' owner: the statement never reads text_chunks
    under its four-level policy. Each candidate's documents, found through search_index and documents
    under the caller's row-level security, keep what the caller may see; only the answer's rows read their version and
    their text (each under its policy).
    """
    if not vectors:
        return _full_text_statement(visible_only)
    hashes = _VISIBLE_TEXTS if visible_only else _NO_TEXTS
    score = f"{EMBEDDING_WEIGHT} * LEAST(1, k.embedding_score) + {FULLTEXT_WEIGHT} * LEAST(1, k.fulltext_score)"
    return sa.text(
        "WITH k AS (SELECT * FROM knowledge.search_chunk_candidates("
        f"{_ALL_WORDS}, {_TSQUERY}, CAST(:v AS public.vector), :m, :k, :cap, {hashes},"
        " CAST(:fh AS text[]), CAST(:fo AS int[]))),"
        " top AS (SELECT doc.*, k.text_hash, k.chunk_start, k.chunk_end, k.embedding_score, k.fulltext_score,"
        f" {score} AS score FROM k CROSS JOIN LATERAL (SELECT d.canonical_url AS url, d.title, d.site_domain,"
        " CAST(d.id AS text) AS document_id, i.snapshot_id FROM knowledge.search_index i"
        + _VISIBLE[_VISIBLE.index(" JOIN knowledge.documents "):] + " AND i.text_hash = k.text_hash"
        # OFFSET 0 keeps this a lookup per candidate (search_index's text_hash index): joined, the
        # planner may hash the caller's whole index to meet a hundred candidates.
        " OFFSET 0) doc ORDER BY score DESC, url, chunk_start LIMIT :limit)"
        " SELECT top.*, s.version, convert_from(substring(convert_to(t.body, 'UTF8') FROM top.chunk_start + 1"
        "   FOR top.chunk_end - top.chunk_start), 'UTF8') AS chunk"
        " FROM top JOIN knowledge.document_snapshots s ON s.id = top.snapshot_id"
        " JOIN knowledge.canonical_texts t ON t.text_hash = top.text_hash")


def _full_text_statement(visible_only: bool) -> sa.TextClause:
    """Without pgvector: migration 0031's word candidates (every word, else any word), scored here."""
    hashes = _VISIBLE_TEXTS if visible_only else _NO_TEXTS
    ctes = [f"every AS (SELECT * FROM knowledge.chunk_word_candidates({_ALL_WORDS}, :k, :cap, {hashes}))",
            f"more AS (SELECT * FROM knowledge.chunk_word_candidates({_TSQUERY}, :k, :cap, {hashes})"
            " WHERE (SELECT count(*) FROM every) < :k)",
            "k AS (SELECT text_hash, ordinal FROM every UNION SELECT text_hash, ordinal FROM more)",
            "scored AS (SELECT d.canonical_url AS url, d.title, d.site_domain, CAST(d.id AS text) AS document_id,"
            " s.version, c.text_hash, c.chunk_start, c.chunk_end, CAST(NULL AS float8) AS embedding_score,"
            f" COALESCE(ts_rank_cd(c.tsv, {_TSQUERY}, 32), 0) AS fulltext_score"
            " FROM k JOIN knowledge.text_chunks c ON c.text_hash = k.text_hash AND c.ordinal = k.ordinal"
            + _VISIBLE.replace(" WHERE ", " JOIN knowledge.document_snapshots s ON s.id = i.snapshot_id WHERE ", 1)
            + ")"]
    return sa.text(
        "WITH " + ", ".join(ctes) +
        " SELECT top.*, convert_from(substring(convert_to(t.body, 'UTF8') FROM top.chunk_start + 1"
        "   FOR top.chunk_end - top.chunk_start), 'UTF8') AS chunk"
        " FROM (SELECT *, LEAST(1, fulltext_score) AS score FROM scored ORDER BY score DESC, url, chunk_start"
        " LIMIT :limit) top JOIN knowledge.canonical_texts t ON t.text_hash = top.text_hash")


def _preview(chunk: str) -> str:
    flat = " ".join(chunk.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1].rsplit(" ", 1)[0] + "…"


def search(deps: Deps, query: str, *, site_domain: str | None = None, limit: int = 10) -> dict[str, Any]:
    """DESIGN.md's Search answer for ``query`` in the caller's tenant scope, best first."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the search query must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the search query is longer than {MAX_QUERY_CHARS} characters")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    if site_domain is not None:
        from gleaner.tenancy import validate_site_domain

        validate_site_domain(site_domain)
    index = deps.search_index
    vector: str | None = None
    model = ""
    floats: list[float] = []
    if index.has_vectors():
        embedder = deps.embedder
        model = embedder.model
        floats = list(embedder.embed([query])[0])
        vector = "[" + ",".join(f"{x:.6f}" for x in floats) + "]"
    params: dict[str, Any] = {"q": query, "v": vector, "m": model, "site": site_domain, "k": max(CANDIDATES, limit),
              "cap": WORD_CAP, "limit": limit}
    with deps.engine.begin() as conn:
        if vector is not None:  # the fresh vectors' nearest by sign bits (gleaner.retrieval.fresh_scan)
            params["fh"], params["fo"] = index.fresh_signs.nearest(conn, model, floats)
        rows: list[Any] = []
        # First over every tenant's chunks; when too few of those are this caller's (a small tenant
        # among large ones), again over the texts the caller's scope sees.
        for visible_only in (False, True):
            rows = list(conn.execute(_statement(vector is not None, visible_only), params).mappings())
            if len(rows) >= limit:
                break
    results = []
    for r in rows:
        es = None if r["embedding_score"] is None else round(min(1.0, float(r["embedding_score"])), 6)
        fs = round(min(1.0, float(r["fulltext_score"])), 6)
        score = fs if es is None else EMBEDDING_WEIGHT * es + FULLTEXT_WEIGHT * fs
        results.append({"url": r["url"], "title": r["title"], "site_domain": r["site_domain"],
                        "document_id": r["document_id"], "version": r["version"], "text_hash": r["text_hash"],
                        "start": r["chunk_start"], "end": r["chunk_end"], "preview": _preview(r["chunk"]),
                        "embedding_score": es, "fulltext_score": fs, "score": round(score, 6)})
    from gleaner.retrieval.composites import composite_hits  # composites' chunks, scored the same way

    results.extend(composite_hits(deps, query, vector, model, site_domain, limit))
    results.sort(key=lambda x: (-x["score"], x["url"] or "", x["start"]))
    return {"query": query, "results": results[:limit]}
