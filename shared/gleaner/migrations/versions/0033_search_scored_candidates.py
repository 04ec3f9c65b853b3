"""Search candidates with their offsets and scores: search no longer reads text_chunks under its policy.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-01

Migration 0031's candidate functions return keys only, so search joined every candidate back to
text_chunks to score it and find its byte range: under text_chunks' parent policy (through
canonical_texts, snapshot_texts, document_snapshots, documents) each of those rows paid a four-level
check, and planning the statement meant planning that check's sublinks too.
``knowledge.search_chunk_candidates(words, any_word, v, model, k, cap, hashes)`` does both lists in one
call, as the table's owner, and returns per candidate what search needs from text_chunks:

- the HNSW index's ``k`` nearest chunks of ``model`` to ``v``, and the ``k`` best by ``ts_rank_cd`` of
  the first ``cap`` chunks matching ``words`` (GIN), merged;
- each with its byte range, ``embedding_score`` (cosine similarity, below 0 counts as 0; 0 for a chunk
  not embedded with ``model``) and ``fulltext_score`` (``ts_rank_cd`` of ``any_word``, ``rank / (rank
  + 1)``; 0 when ``any_word`` is null).

The HNSW scan's ``hnsw.ef_search`` is set to ``k`` (at least pgvector's 40), transaction-local, which
saves search a statement. Never text: numbers and keys, as 0031's functions return keys. Which of
them the caller may see is still decided outside, by joining them through search_index and documents
under the caller's row-level security (gleaner.retrieval.ranking). With ``hashes`` given, only chunks
of those texts, and the nearest of them exactly, by comparing each: 0031's function filtered the HNSW
index's ``ef_search`` nearest, so a tenant small among large ones whose nearest chunks all belong to
others found none by meaning.
Where the server has no pgvector, the function is not created and search keeps 0031's full-text path.
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

SIGNATURE = "knowledge.search_chunk_candidates(tsquery, tsquery, public.vector, text, integer, integer, text[])"

CANDIDATES = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'embedding') THEN
        EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.search_chunk_candidates(
    words tsquery, any_word tsquery, v public.vector, model text, k integer, cap integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer, chunk_start integer, chunk_end integer,
               embedding_score double precision, fulltext_score double precision)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 100 SET search_path = pg_catalog, pg_temp AS $fn$
    -- The HNSW scan returns at most ef_search rows: set here, for the rest of the transaction.
    SELECT set_config('hnsw.ef_search', CAST(GREATEST(k, 40) AS text), true);
    WITH near AS (
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.embedding_model = model
         ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        -- Given texts: every chunk of theirs compared (the "+ 0" keeps the HNSW index out), since the
        -- index would filter its ef_search nearest, which may all be other texts' chunks.
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NOT NULL AND c.text_hash = ANY(hashes) AND c.embedding_model = model
         ORDER BY (c.embedding OPERATOR(public.<=>) v) + 0 LIMIT k)
    ), matched AS (
        SELECT m.text_hash, m.ordinal FROM (
            SELECT c.text_hash, c.ordinal, c.tsv FROM knowledge.text_chunks c
            WHERE c.tsv @@ words AND (hashes IS NULL OR c.text_hash = ANY(hashes)) LIMIT cap) m
        ORDER BY ts_rank_cd(m.tsv, words, 32) DESC LIMIT k
    ), keys AS (
        SELECT * FROM near UNION SELECT * FROM matched
    )
    -- One primary-key lookup per candidate (OFFSET 0: not a join the planner may turn into a scan of
    -- every chunk, as it would for the ten thousand rows it guesses a LIMIT of unknown k returns).
    SELECT s.* FROM keys CROSS JOIN LATERAL (
        SELECT c.text_hash, c.ordinal, c.chunk_start, c.chunk_end,
               CASE WHEN c.embedding_model = model
                    THEN GREATEST(0, 1 - (c.embedding OPERATOR(public.<=>) v)) ELSE 0 END,
               COALESCE(ts_rank_cd(c.tsv, any_word, 32), 0)
        FROM knowledge.text_chunks c WHERE c.text_hash = keys.text_hash AND c.ordinal = keys.ordinal OFFSET 0) s
$fn$;
REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {SIGNATURE} TO gleaner_app;
$sql$;
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(CANDIDATES)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
