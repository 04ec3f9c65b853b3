"""Composite documents in search: which composite's current text is searchable.

Revision ID: 0036
Revises: 0033
Create Date: 2026-12-01

Folding pages into a composite moves their ``rag`` routing to the composite (operator/routing.py),
so the composite's text is what search must answer for them. ``search_index`` is keyed by document
(a composite is not one), hence a table of its own, shaped like it:

- composite_search_index: one row per composite whose current version ingest indexed (its text's
  chunks are in text_chunks like any text's). Search joins it to the composite's current snapshot,
  status, ``rag`` routing and sources (gleaner.retrieval.composites), so a new version, a disabled
  routing, a move to stale or superseded, a deletion, or a source blocked or erased takes the
  composite out in the transaction that makes that change. Tenant-scoped like search_index.
- document_routings_composite: the "has this composite an enabled rag routing?" lookup, as
  document_routings_document (0020) serves documents.
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0036"
down_revision = "0033"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE knowledge.composite_search_index (
    composite_document_id uuid PRIMARY KEY REFERENCES knowledge.composite_documents(id) ON DELETE CASCADE,
    site_domain text NOT NULL,
    snapshot_id uuid NOT NULL REFERENCES knowledge.document_snapshots(id) ON DELETE CASCADE,
    text_hash text NOT NULL,
    indexed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX composite_search_index_site ON knowledge.composite_search_index (site_domain);
CREATE INDEX document_routings_composite ON knowledge.document_routings (composite_document_id, destination)
    WHERE composite_document_id IS NOT NULL;
"""


def upgrade() -> None:
    op.execute(UPGRADE)
    op.execute(tenant_isolation_sql("knowledge.composite_search_index"))


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS knowledge.document_routings_composite")
    op.execute("DROP TABLE IF EXISTS knowledge.composite_search_index")
