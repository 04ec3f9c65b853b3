"""Fresh vectors: ingest's new vectors are searchable at once and enter the HNSW index later.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-02

pgvector's HNSW index costs each inserted vector far more than the rest of its row (the graph's
search and its neighbours' lists rewritten, through the buffer manager), and a crawl paid that in
ingest's transaction. A bulk build of the same index costs a small part of it per vector. So, as
Lucene's refresh and merge or Milvus's growing and sealed segments:

- ``text_chunks.fresh_embedding vector(384)``: where ingest (and ``store_vectors``) write a chunk's
  vector. The HNSW index covers ``embedding`` only and skips nulls, so a fresh vector costs the
  index nothing. ``text_chunks_fresh`` (partial, on the fresh rows only) finds them for search and
  for the merge (gleaner.retrieval.fresh), which moves them into ``embedding``, or rebuilds the
  index in bulk when the fresh set is large beside it. ``embedding_model`` is the model of
  whichever of the two holds the vector; at most one does.
- the candidate functions of migrations 0031 and 0033 read both: the HNSW index's nearest over
  ``embedding`` and, beside them, the exact nearest of the fresh vectors (each compared: the fresh
  set is kept small), scored with the same cosine, so a search answers as if every vector were in
  the one index. The fresh column's storage is MAIN: its vectors stay in their rows (pgvector's type
  defaults to out-of-line storage, and reading thousands of them through the TOAST table would be
  most of a search's time).

Where the server has no pgvector, nothing here applies (search keeps 0031's full-text path).
"""

import importlib.util
from pathlib import Path
from typing import Any

from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

# The vector of a chunk, wherever it is (at most one of the two is set).
_VECTOR = "COALESCE(c.embedding, c.fresh_embedding)"

UPGRADE = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'embedding') THEN
        ALTER TABLE knowledge.text_chunks ADD COLUMN fresh_embedding public.vector(384);
        -- Kept in the row: search reads every fresh vector, and the vector type's own storage
        -- (external) moves it to the TOAST table once a chunk's row passes 2 kB, a second lookup each.
        ALTER TABLE knowledge.text_chunks ALTER COLUMN fresh_embedding SET STORAGE MAIN;
        CREATE INDEX text_chunks_fresh ON knowledge.text_chunks (text_hash, ordinal)
            WHERE fresh_embedding IS NOT NULL;
        EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.search_chunk_candidates(
    words tsquery, any_word tsquery, v public.vector, model text, k integer, cap integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer, chunk_start integer, chunk_end integer,
               embedding_score double precision, fulltext_score double precision)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 150 SET search_path = pg_catalog, pg_temp AS $fn$
    -- The HNSW scan returns at most ef_search rows: set here, for the rest of the transaction.
    SELECT set_config('hnsw.ef_search', CAST(GREATEST(k, 40) AS text), true);
    WITH near AS (
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.embedding_model = model
         ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        -- The fresh vectors (not in the HNSW index yet), each compared: the merge keeps them few.
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.fresh_embedding IS NOT NULL AND c.embedding_model = model
         ORDER BY c.fresh_embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        -- Given texts: every chunk of theirs compared, fresh or indexed (no HNSW scan), since the
        -- index would filter its ef_search nearest, which may all be other texts' chunks.
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NOT NULL AND c.text_hash = ANY(hashes) AND c.embedding_model = model
         ORDER BY {_VECTOR} OPERATOR(public.<=>) v LIMIT k)
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
                    THEN GREATEST(0, 1 - ({_VECTOR} OPERATOR(public.<=>) v)) ELSE 0 END,
               COALESCE(ts_rank_cd(c.tsv, any_word, 32), 0)
        FROM knowledge.text_chunks c WHERE c.text_hash = keys.text_hash AND c.ordinal = keys.ordinal OFFSET 0) s
$fn$;
CREATE OR REPLACE FUNCTION knowledge.chunk_vector_candidates(v public.vector, model text, k integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT n.text_hash, n.ordinal FROM (
        (SELECT c.text_hash, c.ordinal, c.embedding OPERATOR(public.<=>) v AS d FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.embedding_model = model
         ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        (SELECT c.text_hash, c.ordinal, c.fresh_embedding OPERATOR(public.<=>) v FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.fresh_embedding IS NOT NULL AND c.embedding_model = model
         ORDER BY c.fresh_embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        (SELECT c.text_hash, c.ordinal, {_VECTOR} OPERATOR(public.<=>) v FROM knowledge.text_chunks c
         WHERE hashes IS NOT NULL AND c.text_hash = ANY(hashes) AND c.embedding_model = model
         ORDER BY {_VECTOR} OPERATOR(public.<=>) v LIMIT k)) n
    ORDER BY n.d LIMIT k
$fn$;
$sql$;
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    # Back to one column: the fresh vectors move into the indexed one first (the HNSW index's upkeep).
    op.execute("""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'fresh_embedding') THEN
        UPDATE knowledge.text_chunks SET embedding = fresh_embedding WHERE fresh_embedding IS NOT NULL;
        ALTER TABLE knowledge.text_chunks DROP COLUMN fresh_embedding;
    END IF;
END
$$;
""")
    # 0031's and 0033's functions, as they were.
    op.execute(_earlier("0031_search_candidates").VECTORS)
    op.execute(_earlier("0033_search_scored_candidates").CANDIDATES)


def _earlier(name: str) -> Any:
    """An earlier migration's module (the versions directory is not a package)."""
    spec = importlib.util.spec_from_file_location(f"_gleaner_migration_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
