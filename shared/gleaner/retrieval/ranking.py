"""Hybrid search over site documents: ranked citable chunks with their embedding and full-text scores.

Two candidate lists, merged and re-scored:

- by meaning: the HNSW index's nearest chunks to the query's vector (cosine), when pgvector is there;
- by words: chunks whose full-text vector matches any of the query's stemmed words.

Every candidate gets both scores, each 0-1: ``embedding_score`` is the cosine similarity (below 0
counts as 0), ``fulltext_score`` is ``ts_rank_cd`` with PostgreSQL's ``rank / (rank + 1)``
normalisation; ``score = 0.6 * embedding + 0.4 * full text`` (the feed spec's blend). Without
pgvector ``embedding_score`` is null and ``score`` is the full-text score.

Only documents in ``search_index`` whose indexed snapshot is still their current one, that are
active, not deleted and have an enabled ``rag`` routing are answered: row-level security on
``documents`` and ``search_index`` limits that to the caller's tenant scope. The HNSW index holds
every tenant's chunks, so its nearest neighbours may all belong to others; when too few of them are
visible, the visible chunks are ranked exactly instead (a small tenant's chunks are few). The same
holds for the full-text candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
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
WORD_CAP = 400  # full-text matches ranked per query: beyond it an arbitrary subset (the index's order)
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


def _by_meaning(conn: Any, vector: str, model: str, site: str | None, k: int, visible_only: bool
                ) -> list[tuple[str, int]]:
    # The HNSW index's nearest chunks, through knowledge.chunk_vector_candidates (migration 0031): it
    # reads text_chunks as its owner, so no per-row policy check stands between the index and LIMIT.
    conn.execute(sa.text(f"SET LOCAL hnsw.ef_search = {max(k, 40)}"))
    hashes = _VISIBLE_TEXTS if visible_only else "CAST(NULL AS text[])"
    sql = ("SELECT text_hash, ordinal FROM knowledge.chunk_vector_candidates("
           f"CAST(:v AS public.vector), :m, :k, {hashes})")
    return [(r[0], r[1]) for r in conn.execute(sa.text(sql), {"v": vector, "m": model, "k": k, "site": site})]


def _by_words(conn: Any, query: str, site: str | None, k: int, any_word: bool, visible_only: bool
              ) -> list[tuple[str, int]]:
    # The GIN index's matches, at most WORD_CAP of them ranked (knowledge.chunk_word_candidates): chunks
    # with every word first; without vectors, chunks with any word when those are too few.
    hashes = _VISIBLE_TEXTS if visible_only else "CAST(NULL AS text[])"
    keys: list[tuple[str, int]] = []
    for selector in (_ALL_WORDS, _TSQUERY) if any_word else (_ALL_WORDS,):
        sql = f"SELECT text_hash, ordinal FROM knowledge.chunk_word_candidates({selector}, :k, :cap, {hashes})"
        keys += [(r[0], r[1]) for r in conn.execute(sa.text(sql), {"q": query, "k": k, "cap": WORD_CAP,
                                                                   "site": site})]
        if len(keys) >= k:
            break
    return list(dict.fromkeys(keys))


def _scored(conn: Any, keys: list[tuple[str, int]], query: str, vector: str | None, site: str | None
            ) -> list[Mapping[str, Any]]:
    embedding = ("GREATEST(0, 1 - (c.embedding OPERATOR(public.<=>) CAST(:v AS public.vector)))"
                 if vector is not None else "CAST(NULL AS float8)")
    return list(conn.execute(sa.text(
        "WITH k AS (SELECT * FROM unnest(CAST(:h AS text[]), CAST(:o AS int[])) AS k(text_hash, ordinal))"
        f" SELECT d.canonical_url AS url, d.title, d.site_domain, CAST(d.id AS text) AS document_id, s.version,"
        f" c.text_hash, c.chunk_start, c.chunk_end, {embedding} AS embedding_score,"
        f" COALESCE(ts_rank_cd(c.tsv, {_TSQUERY}, 32), 0) AS fulltext_score,"
        " convert_from(substring(convert_to(t.body, 'UTF8') FROM c.chunk_start + 1"
        "   FOR c.chunk_end - c.chunk_start), 'UTF8') AS chunk"
        " FROM k JOIN knowledge.text_chunks c ON c.text_hash = k.text_hash AND c.ordinal = k.ordinal"
        " JOIN knowledge.canonical_texts t ON t.text_hash = c.text_hash" + _VISIBLE.replace(
            " WHERE ", " JOIN knowledge.document_snapshots s ON s.id = i.snapshot_id WHERE ", 1)),
        {"h": [h for h, _o in keys], "o": [o for _h, o in keys], "q": query, "v": vector, "site": site}
    ).mappings())


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
    if index.has_vectors():
        embedder = deps.embedder
        model = embedder.model
        vector = "[" + ",".join(f"{x:.6f}" for x in embedder.embed([query])[0]) + "]"
    k = max(CANDIDATES, limit)
    with deps.engine.begin() as conn:
        rows: list[Mapping[str, Any]] = []
        # First from the indexes over every tenant's chunks; when too few of those are this caller's
        # (a small tenant among large ones), again over the caller's visible chunks only.
        for visible_only in (False, True):
            keys = _by_words(conn, query, site_domain, k, vector is None, visible_only)
            if vector is not None:
                keys = list(dict.fromkeys(_by_meaning(conn, vector, model, site_domain, k, visible_only) + keys))
            rows = _scored(conn, keys, query, vector, site_domain) if keys else []
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
    results.sort(key=lambda x: (-x["score"], x["url"] or "", x["start"]))
    return {"query": query, "results": results[:limit]}
