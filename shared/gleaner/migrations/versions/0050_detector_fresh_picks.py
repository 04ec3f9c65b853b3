"""The contradiction detector's nearest chunks among the fresh vectors: the ones the sign bits chose.

Revision ID: 0050
Revises: 0049
Create Date: 2026-12-05

``knowledge.chunk_vector_candidates`` (migration 0037) compares every fresh vector with the query. The
contradiction detector asks it once for each chunk of every page ingest indexes, so during a first
crawl, which leaves every vector fresh, a page cost a scan of all the pages before it: the crawl's
cost grew with the square of its size. Search stopped doing that in migration 0042 (the caller's
sign-bit scan picks the keys, the function compares those exactly); the detector now does the same
through this overload, which takes the picked keys (``fresh_hashes``, ``fresh_ordinals``; null:
every fresh vector compared, as the four-argument function does). The HNSW graph's part and the
given-texts part are the four-argument function's. Without pgvector nothing here applies.
"""

from alembic import op

revision = "0050"
down_revision = "0049"
branch_labels = None
depends_on = None

_VECTOR = "COALESCE(c.embedding, c.fresh_embedding)"
SIGNATURE = "knowledge.chunk_vector_candidates(public.vector, text, integer, text[], text[], integer[])"

FUNCTION = f"""
CREATE OR REPLACE FUNCTION knowledge.chunk_vector_candidates(v public.vector, model text, k integer, hashes text[],
                                                             fresh_hashes text[], fresh_ordinals integer[])
RETURNS TABLE (text_hash text, ordinal integer)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT n.text_hash, n.ordinal FROM (
        (SELECT c.text_hash, c.ordinal, c.embedding OPERATOR(public.<=>) v AS d FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND c.embedding_model = model
         ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        -- The fresh vectors the caller's sign-bit scan picked, each looked up by its key and compared.
        (SELECT f.text_hash, f.ordinal, f.d FROM (
            SELECT c.text_hash, c.ordinal, {_VECTOR} OPERATOR(public.<=>) v AS d
            FROM unnest(fresh_hashes, fresh_ordinals) AS g(h, o)
            CROSS JOIN LATERAL (SELECT * FROM knowledge.text_chunks c
                                WHERE c.text_hash = g.h AND c.ordinal = g.o AND c.embedding_model = model
                                OFFSET 0) c) f
         WHERE hashes IS NULL AND fresh_hashes IS NOT NULL
         ORDER BY f.d LIMIT k)
        UNION ALL
        -- No picks given: every fresh vector compared.
        (SELECT c.text_hash, c.ordinal, c.fresh_embedding OPERATOR(public.<=>) v FROM knowledge.text_chunks c
         WHERE hashes IS NULL AND fresh_hashes IS NULL AND c.fresh_embedding IS NOT NULL
         AND c.embedding_model = model
         ORDER BY c.fresh_embedding OPERATOR(public.<=>) v LIMIT k)
        UNION ALL
        (SELECT c.text_hash, c.ordinal, {_VECTOR} OPERATOR(public.<=>) v FROM knowledge.text_chunks c
         WHERE hashes IS NOT NULL AND c.text_hash = ANY(hashes) AND c.embedding_model = model
         ORDER BY {_VECTOR} OPERATOR(public.<=>) v LIMIT k)) n
    ORDER BY n.d LIMIT k
$fn$;
"""

UPGRADE = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'fresh_embedding') THEN
        EXECUTE $sql${FUNCTION}$sql$;
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
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
