"""Session 9's search statement, kept as the baseline ``retrieval.py`` times the current one against.

Migration 0031's candidate functions return keys only; this statement joins every candidate back to
text_chunks (under its row policy) to score it. Swapped in for ``gleaner.retrieval.ranking._statement``
on alternate turns of the same queries on the same database. Frozen: do not edit.
"""

from __future__ import annotations

import sqlalchemy as sa

EMBEDDING_WEIGHT = 0.6
FULLTEXT_WEIGHT = 0.4
CANDIDATES = 50  # per list (gleaner.retrieval.ranking.CANDIDATES then)

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
    """One statement: both candidate lists, each candidate scored if visible, the ``:limit`` best sliced.

    The candidates come from knowledge.chunk_word_candidates and knowledge.chunk_vector_candidates
    (migration 0031): they read text_chunks as its owner, so no per-row policy check stands between
    the GIN or HNSW index and its LIMIT, and return keys only; the joins here, under the caller's
    row-level security, keep what the caller may see. Only the answer's rows read the text bodies.
    """
    hashes = _VISIBLE_TEXTS if visible_only else _NO_TEXTS
    ctes = [f"every AS (SELECT * FROM knowledge.chunk_word_candidates({_ALL_WORDS}, :k, :cap, {hashes}))"]
    if vectors:
        ctes.append("more AS (SELECT * FROM knowledge.chunk_vector_candidates("
                    f"CAST(:v AS public.vector), :m, :k, {hashes}))")
        embedding = "GREATEST(0, 1 - (c.embedding OPERATOR(public.<=>) CAST(:v AS public.vector)))"
        score = f"{EMBEDDING_WEIGHT} * LEAST(1, embedding_score) + {FULLTEXT_WEIGHT} * LEAST(1, fulltext_score)"
    else:  # full text only: chunks with any word of the query when too few have every word
        ctes.append(f"more AS (SELECT * FROM knowledge.chunk_word_candidates({_TSQUERY}, :k, :cap, {hashes})"
                    " WHERE (SELECT count(*) FROM every) < :k)")
        embedding = "CAST(NULL AS float8)"
        score = "LEAST(1, fulltext_score)"
    ctes.append("k AS (SELECT text_hash, ordinal FROM every UNION SELECT text_hash, ordinal FROM more)")
    ctes.append(
        "scored AS (SELECT d.canonical_url AS url, d.title, d.site_domain, CAST(d.id AS text) AS document_id,"
        f" s.version, c.text_hash, c.chunk_start, c.chunk_end, {embedding} AS embedding_score,"
        f" COALESCE(ts_rank_cd(c.tsv, {_TSQUERY}, 32), 0) AS fulltext_score"
        " FROM k JOIN knowledge.text_chunks c ON c.text_hash = k.text_hash AND c.ordinal = k.ordinal"
        + _VISIBLE.replace(" WHERE ", " JOIN knowledge.document_snapshots s ON s.id = i.snapshot_id WHERE ", 1)
        + ")")
    return sa.text(
        "WITH " + ", ".join(ctes) +
        " SELECT top.*, convert_from(substring(convert_to(t.body, 'UTF8') FROM top.chunk_start + 1"
        "   FOR top.chunk_end - top.chunk_start), 'UTF8') AS chunk"
        f" FROM (SELECT *, {score} AS score FROM scored ORDER BY score DESC, url, chunk_start LIMIT :limit) top"
        " JOIN knowledge.canonical_texts t ON t.text_hash = top.text_hash")
