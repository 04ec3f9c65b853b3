"""Fresh segments: the sign bits of the vectors not in the HNSW graph, for a fast exact-enough scan.

Revision ID: 0042
Revises: 0041
Create Date: 2026-12-05

A crawl no longer merges its vectors into the graph (gleaner.retrieval.fresh): a 20,000-page first
crawl leaves hundreds of thousands of fresh vectors, and comparing each in SQL (a row and a cosine
each) takes a second or more a search. So each batch that writes fresh vectors also writes one
``knowledge.fresh_segments`` row: its chunks' keys and each vector's sign bits (one bit a dimension,
48 bytes for 384). A search process keeps the segments in memory (gleaner.retrieval.fresh_scan),
ranks every fresh vector by the Hamming distance of its bits to the query's, and hands the nearest
few hundred keys to ``search_chunk_candidates``, which compares their full vectors exactly. A segment
is deleted by the merge once its vectors are in a valid graph.

``search_chunk_candidates`` gains the two arrays of those keys (null: compare every fresh vector in
SQL, as migration 0037 did), and reads the graph only while ``text_chunks_embedding`` is valid: the
merge rebuilds it with ``CREATE INDEX CONCURRENTLY`` (never locking ingest or search out), and while
it builds, every vector it will hold is still in a segment.

The segments hold keys and sign bits of every tenant's chunks, no text: like the candidate functions'
answers, the search statement keeps only the keys the caller's row-level security lets through.
"""

from alembic import op

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None

_VECTOR = "COALESCE(c.embedding, c.fresh_embedding)"
# Whether the HNSW graph may be read: absent or invalid while the merge rebuilds it.
_GRAPH_READY = ("COALESCE((SELECT i.indisvalid FROM pg_catalog.pg_index i"
                " WHERE i.indexrelid = pg_catalog.to_regclass('knowledge.text_chunks_embedding')), false)")

SIGNATURE = ("knowledge.search_chunk_candidates(tsquery, tsquery, public.vector, text, integer, integer, text[],"
             " text[], integer[])")
_OLD_SIGNATURE = "knowledge.search_chunk_candidates(tsquery, tsquery, public.vector, text, integer, integer, text[])"

CANDIDATES = f"""
CREATE OR REPLACE FUNCTION knowledge.search_chunk_candidates(
    words tsquery, any_word tsquery, v public.vector, model text, k integer, cap integer, hashes text[],
    fresh_hashes text[], fresh_ordinals integer[])
RETURNS TABLE (text_hash text, ordinal integer, chunk_start integer, chunk_end integer,
               embedding_score double precision, fulltext_score double precision)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 150 SET search_path = pg_catalog, pg_temp AS $fn$
    -- The HNSW scan returns at most ef_search rows: set here, for the rest of the transaction.
    SELECT set_config('hnsw.ef_search', CAST(GREATEST(k, 40) AS text), true);
    WITH near AS (
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.embedding_model = model AND {_GRAPH_READY}
         ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        -- The fresh vectors' nearest by sign bits (the caller's scan), compared exactly here.
        (SELECT f.text_hash, f.ordinal FROM (
            SELECT c.text_hash, c.ordinal, {_VECTOR} AS e
            FROM unnest(fresh_hashes, fresh_ordinals) AS g(h, o)
            CROSS JOIN LATERAL (SELECT * FROM knowledge.text_chunks c
                                WHERE c.text_hash = g.h AND c.ordinal = g.o AND c.embedding_model = model
                                OFFSET 0) c) f
         WHERE hashes IS NULL AND fresh_hashes IS NOT NULL
         ORDER BY f.e OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        -- No scan given: every fresh vector compared here (migration 0037's way).
        (SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND fresh_hashes IS NULL AND c.fresh_embedding IS NOT NULL
         AND c.embedding_model = model
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
    SELECT s.* FROM keys CROSS JOIN LATERAL (
        SELECT c.text_hash, c.ordinal, c.chunk_start, c.chunk_end,
               CASE WHEN c.embedding_model = model
                    THEN GREATEST(0, 1 - ({_VECTOR} OPERATOR(public.<=>) v)) ELSE 0 END,
               COALESCE(ts_rank_cd(c.tsv, any_word, 32), 0)
        FROM knowledge.text_chunks c WHERE c.text_hash = keys.text_hash AND c.ordinal = keys.ordinal OFFSET 0) s
$fn$;
"""

UPGRADE = f"""
CREATE TABLE knowledge.fresh_segments (
    id bigserial PRIMARY KEY,
    model text NOT NULL,
    hashes text[] NOT NULL,
    ordinals integer[] NOT NULL,
    signs bytea NOT NULL
);
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'fresh_embedding') THEN
        -- Fresh vectors written before segments existed have none: into the graph now (the old
        -- code kept them to a few thousand).
        UPDATE knowledge.text_chunks SET embedding = fresh_embedding, fresh_embedding = NULL
         WHERE fresh_embedding IS NOT NULL;
        DROP FUNCTION IF EXISTS {_OLD_SIGNATURE};
        EXECUTE $sql${CANDIDATES}$sql$;
        -- Only the application role calls it (it reads every tenant's chunks as their owner).
        EXECUTE 'REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC';
        EXECUTE 'GRANT EXECUTE ON FUNCTION {SIGNATURE} TO gleaner_app';
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_gleaner_migration_0037",
                                                  Path(__file__).with_name("0037_fresh_vectors.py"))
    assert spec is not None and spec.loader is not None
    earlier = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(earlier)
    op.execute(f"""
DO $$
BEGIN
    DROP FUNCTION IF EXISTS {SIGNATURE};
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'fresh_embedding')
       AND pg_catalog.to_regclass('knowledge.text_chunks_embedding') IS NULL THEN
        EXECUTE 'CREATE INDEX text_chunks_embedding ON knowledge.text_chunks'
                ' USING hnsw (embedding public.vector_cosine_ops) WITH (m = 16, ef_construction = 64)';
    END IF;
END
$$;
DROP TABLE knowledge.fresh_segments;
""")
    # 0037's candidate function, as it was (its text is the one statement 0037 runs by EXECUTE).
    function = earlier.UPGRADE.split("EXECUTE $sql$", 1)[1].split("$sql$;", 1)[0]
    op.execute("DO $$ BEGIN IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'"
               " AND table_name = 'text_chunks' AND column_name = 'fresh_embedding') THEN"
               f" EXECUTE $sql${function}$sql$;"
               f" EXECUTE 'REVOKE ALL ON FUNCTION {_OLD_SIGNATURE} FROM PUBLIC';"
               f" EXECUTE 'GRANT EXECUTE ON FUNCTION {_OLD_SIGNATURE} TO gleaner_app'; END IF; END $$;")
