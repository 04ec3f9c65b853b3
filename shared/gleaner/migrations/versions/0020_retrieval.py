"""Retrieval: citable chunks of canonical text, their embeddings, which documents are searchable.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01

- text_chunks: a canonical text cut along its span ledger (gleaner.retrieval.chunks). Keyed by the
  text's hash, like the text and its spans: the same text is chunked and embedded once, whichever
  documents or tenants hold it. ``tsv`` is the chunk's full-text vector (with its section heading).
  Where the server has pgvector, ``embedding vector(384)`` with its model recorded beside it and an
  HNSW index (m = 16, ef_construction = 64, the feed spec's precedent); without pgvector the column
  does not exist and search ranks by full text alone (gleaner.retrieval.index reads which).
- search_index: which document's current text is searchable (one row per document, tenant-scoped).
  Search joins it to the document's current snapshot, status and rag routing, so a new version,
  a block, an erasure or a removed routing takes the document out in the transaction that makes it.
- routing_handovers: what a ``skill`` or ``config`` routing hands to its downstream system, one
  record per document version and destination, announced by a ``routing.handover`` change event.
- reference_items.embedding: the feed spec's whole-record embedding (pgvector only).
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE knowledge.text_chunks (
    text_hash text NOT NULL,
    ordinal integer NOT NULL,
    chunk_start integer NOT NULL,
    chunk_end integer NOT NULL,
    heading text NOT NULL DEFAULT '',
    tsv tsvector NOT NULL,
    embedding_model text,
    embedding_dim integer,
    PRIMARY KEY (text_hash, ordinal),
    CHECK (0 <= chunk_start AND chunk_start < chunk_end)
);
CREATE INDEX text_chunks_tsv ON knowledge.text_chunks USING gin (tsv);

CREATE TABLE knowledge.search_index (
    document_id uuid PRIMARY KEY REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    site_domain text NOT NULL,
    snapshot_id uuid NOT NULL REFERENCES knowledge.document_snapshots(id) ON DELETE CASCADE,
    text_hash text NOT NULL,
    indexed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX search_index_text ON knowledge.search_index (text_hash);
CREATE INDEX search_index_site ON knowledge.search_index (site_domain);
-- search asks "has this document an enabled rag routing?" per candidate; the routings' unique index
-- leads with an expression (COALESCE(document_id, composite_document_id)) the planner does not use here.
CREATE INDEX document_routings_document ON knowledge.document_routings (document_id, destination)
    WHERE document_id IS NOT NULL;

CREATE TABLE knowledge.routing_handovers (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    snapshot_id uuid NOT NULL REFERENCES knowledge.document_snapshots(id) ON DELETE CASCADE,
    destination knowledge.routing_destination NOT NULL,
    target_ref text NOT NULL DEFAULT '',
    text_hash text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (site_domain, document_id, snapshot_id, destination, target_ref)
);
"""

# pgvector where the server has it (the embedded pgserver bundles it; Debian's PostgreSQL here does not):
# a migration must run on both, so the vector parts are conditional.
VECTOR = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pgvector present but not creatable by this role: search falls back to full text';
            RETURN;
        END;
        ALTER TABLE knowledge.text_chunks ADD COLUMN embedding public.vector(384);
        CREATE INDEX text_chunks_embedding ON knowledge.text_chunks
            USING hnsw (embedding public.vector_cosine_ops) WITH (m = 16, ef_construction = 64);
        CREATE INDEX text_chunks_unembedded ON knowledge.text_chunks (text_hash) WHERE embedding IS NULL;
        ALTER TABLE knowledge.reference_items ADD COLUMN embedding public.vector(384),
            ADD COLUMN embedding_model text, ADD COLUMN embedding_dim integer;
        CREATE INDEX reference_items_embedding ON knowledge.reference_items
            USING hnsw (embedding public.vector_cosine_ops) WITH (m = 16, ef_construction = 64);
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute("ALTER TYPE knowledge.document_event_type ADD VALUE IF NOT EXISTS 'routing.handover'")
    op.execute(UPGRADE)
    op.execute(VECTOR)
    for table in ("knowledge.search_index", "knowledge.routing_handovers"):
        op.execute(tenant_isolation_sql(table))


def downgrade() -> None:
    op.execute("ALTER TABLE knowledge.reference_items DROP COLUMN IF EXISTS embedding,"
               " DROP COLUMN IF EXISTS embedding_model, DROP COLUMN IF EXISTS embedding_dim")
    op.execute("DROP INDEX IF EXISTS knowledge.document_routings_document")
    op.execute("DROP TABLE IF EXISTS knowledge.routing_handovers")
    op.execute("DROP TABLE IF EXISTS knowledge.search_index")
    op.execute("DROP TABLE IF EXISTS knowledge.text_chunks")
