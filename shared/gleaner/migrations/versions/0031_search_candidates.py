"""Search candidates through the indexes: two functions that read text_chunks past its row policy.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-01

Row-level security on text_chunks (a parent policy through canonical_texts, snapshot_texts,
document_snapshots, documents) is evaluated before any condition that is not leakproof, and
``tsvector @@ tsquery`` is not: under the policy the planner cannot use the GIN index and checks the
four-level policy on every chunk (seconds at 100,000 chunks). The HNSW scan is used, but each
neighbour pays the same check. So the candidate step reads text_chunks as the table's owner:

- ``knowledge.chunk_word_candidates(q, k, cap, hashes)``: at most ``cap`` chunks matching ``q``
  (GIN), the ``k`` best of them by ``ts_rank_cd``;
- ``knowledge.chunk_vector_candidates(v, model, k, hashes)``: the HNSW index's ``k`` nearest chunks.

Both return keys only (text hash, ordinal), never text (``ROWS 50``: search asks for about that many,
and the planner then joins them by index rather than hashing every indexed document), and search joins them back through
search_index and documents, whose policies decide what the caller sees (gleaner.retrieval.ranking).
With ``hashes`` given, only chunks of those texts: the caller passes the texts its own scope sees.
text_chunks keeps its policy for every other reader, the application role included; only FORCE
goes, so that functions owned by the table's owner (the migrating role) read it whole. Where that
role is a superuser (the embedded server) nothing changes: superusers bypass row-level security.
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

WORDS = """
CREATE OR REPLACE FUNCTION knowledge.chunk_word_candidates(q tsquery, k integer, cap integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT m.text_hash, m.ordinal FROM (
        SELECT c.text_hash, c.ordinal, c.tsv FROM knowledge.text_chunks c
        WHERE c.tsv @@ q AND (hashes IS NULL OR c.text_hash = ANY(hashes)) LIMIT cap) m
    ORDER BY ts_rank_cd(m.tsv, q, 32) DESC LIMIT k
$fn$;
REVOKE ALL ON FUNCTION knowledge.chunk_word_candidates(tsquery, integer, integer, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION knowledge.chunk_word_candidates(tsquery, integer, integer, text[]) TO gleaner_app;
"""

VECTORS = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'
               AND table_name = 'text_chunks' AND column_name = 'embedding') THEN
        EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.chunk_vector_candidates(v public.vector, model text, k integer, hashes text[])
RETURNS TABLE (text_hash text, ordinal integer)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT c.text_hash, c.ordinal FROM knowledge.text_chunks c
    WHERE c.embedding_model = model AND (hashes IS NULL OR c.text_hash = ANY(hashes))
    ORDER BY c.embedding OPERATOR(public.<=>) v LIMIT k
$fn$;
REVOKE ALL ON FUNCTION knowledge.chunk_vector_candidates(public.vector, text, integer, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION knowledge.chunk_vector_candidates(public.vector, text, integer, text[]) TO gleaner_app;
$sql$;
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.text_chunks NO FORCE ROW LEVEL SECURITY")
    op.execute(WORDS)
    op.execute(VECTORS)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS knowledge.chunk_vector_candidates(public.vector, text, integer, text[])")
    op.execute("DROP FUNCTION IF EXISTS knowledge.chunk_word_candidates(tsquery, integer, integer, text[])")
    op.execute("ALTER TABLE knowledge.text_chunks FORCE ROW LEVEL SECURITY")
